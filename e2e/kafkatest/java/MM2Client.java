package kmirror.e2e;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.MirrorClient;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/**
 * MirrorMaker 2's client API, run against a cluster as an application
 * would: the e2e tests check that what kmirror writes answers it.
 *
 * MM2Client BOOTSTRAP ALIAS hops           prints "hops N" (MirrorClient.replicationHops)
 * MM2Client BOOTSTRAP ALIAS translate G... prints "G TOPIC PARTITION OFFSET" per translated
 *                                          partition (RemoteClusterUtils.translateOffsets)
 */
public class MM2Client {
    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: MM2Client BOOTSTRAP ALIAS hops | translate GROUP...");
            System.exit(2);
        }
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        String alias = args[1];
        switch (args[2]) {
            case "hops":
                try (MirrorClient client = new MirrorClient(props)) {
                    System.out.println("hops " + client.replicationHops(alias));
                }
                break;
            case "translate":
                for (int i = 3; i < args.length; i++) {
                    String group = args[i];
                    Map<TopicPartition, OffsetAndMetadata> offsets =
                        RemoteClusterUtils.translateOffsets(props, alias, group, Duration.ofSeconds(30));
                    Map<String, Long> sorted = new TreeMap<>();
                    offsets.forEach((tp, om) -> sorted.put(tp.topic() + " " + tp.partition(), om.offset()));
                    sorted.forEach((tp, off) -> System.out.println(group + " " + tp + " " + off));
                }
                break;
            default:
                System.err.println("unknown command " + args[2]);
                System.exit(2);
        }
    }
}
