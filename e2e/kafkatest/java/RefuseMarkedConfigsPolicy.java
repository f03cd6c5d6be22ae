package kmirror.e2e;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;

import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.server.policy.CreateTopicPolicy;

/**
 * A create.topic.policy.class.name for the kmirror end-to-end tests: it makes a broker stricter
 * than Kafka's own config validation, on demand. A topic is refused while the file
 * {@code <dir>/refuse-<key>=<value>} exists for one of the configs it is created with, where
 * {@code <dir>} is the broker property {@code kmirror.e2e.policy.dir}. A test creates the file,
 * watches the creation fail, removes it and watches the retry succeed.
 */
public class RefuseMarkedConfigsPolicy implements CreateTopicPolicy {
    public static final String DIR_CONFIG = "kmirror.e2e.policy.dir";

    private Path dir;

    @Override
    public void configure(Map<String, ?> configs) {
        Object d = configs.get(DIR_CONFIG);
        if (d == null) {
            throw new IllegalArgumentException(DIR_CONFIG + " is not set");
        }
        dir = Paths.get(d.toString());
    }

    @Override
    public void validate(RequestMetadata request) throws PolicyViolationException {
        for (Map.Entry<String, String> e : request.configs().entrySet()) {
            Path marker = dir.resolve("refuse-" + e.getKey() + "=" + e.getValue());
            if (Files.exists(marker)) {
                throw new PolicyViolationException("topic " + request.topic() + ": config " + e.getKey() + "="
                        + e.getValue() + " is refused by this cluster's create topic policy");
            }
        }
    }

    @Override
    public void close() {
    }
}
