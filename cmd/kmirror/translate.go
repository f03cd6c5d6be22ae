package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/connector"
)

func cmdTranslate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("translate", "Prints, for a failover, the target offset of every partition a source consumer group\ncommitted on: the target offset of the first mirrored record at or after its committed\nsource offset, read from the offset index kmirror keeps on the target. A consumer that\nstarts there reads exactly the records it had not read on the source. A partition whose\noffset cannot be translated exactly (older than the offset index, nothing copied yet) is\nprinted as untranslatable with the reason and never applied. An offset older than where\nkmirror took over from MirrorMaker 2 is translated from MM2's offset syncs, as MM2 does:\nMM2-accurate, not exact (NOTE says so; a consumer may re-read records, never skip one).\nWhen the source cannot be reached, the group's offsets come from its checkpoints, which\nkmirror keeps on the target (stderr says so, with their age).\nWith --apply the offsets are committed to the group on the target: refused while it has\nactive members there, when its current offsets there cannot be read, and when it would\nmove a partition backwards (unless --allow-rewind).", stderr)
	path := configFlag(fs, "the config file")
	group := fs.String("group", "", "the consumer group (required)")
	mirror := fs.String("mirror", "", "the mirror (required when the config has several)")
	apply := fs.Bool("apply", false, "commit the translated offsets to the target group")
	allowRewind := fs.Bool("allow-rewind", false, "with --apply: commit even where that moves the target group backwards")
	sourceTimeout := fs.Duration("source-timeout", 10*time.Second, "how long to try the source before translating the group's checkpoints stored on the target")
	fromCheckpoints := fs.Bool("from-checkpoints", false, "translate the group's checkpoints stored on the target without asking the source")
	out := outputFlag(fs)
	timeout := timeoutFlag(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *group == "" {
		fmt.Fprintln(stderr, "--group is required")
		fs.Usage()
		return exitUsage
	}
	if *allowRewind && !*apply {
		fmt.Fprintln(stderr, "--allow-rewind only applies with --apply")
		return exitUsage
	}
	return onMirror(*path, *mirror, *timeout, stderr, func(ctx context.Context, m *connector.Mirror) int {
		st, err := m.Translate(ctx, *group, connector.TranslateOptions{Apply: *apply, AllowRewind: *allowRewind, SourceTimeout: *sourceTimeout, FromCheckpoints: *fromCheckpoints})
		if out.JSON() {
			writeJSON(stdout, st)
		} else if len(st.Partitions) > 0 {
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SOURCE TOPIC\tPARTITION\tSOURCE OFFSET\tTARGET TOPIC\tTARGET OFFSET\tNOT COPIED\tNOTE")
			for _, p := range st.Partitions {
				note, target := "exact", fmt.Sprint(p.TargetOffset)
				switch {
				case p.Untranslatable:
					note, target = "untranslatable: "+p.Reason, "-"
				case p.Approximate:
					note = "MM2-accurate: " + p.Reason
				case p.Behind:
					note = "behind: records before the source offset are not mirrored yet"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\n", p.SourceTopic, p.Partition, p.SourceOffset, p.TargetTopic, target, p.NotCopied, note)
			}
			_ = tw.Flush()
		}
		untranslatable := 0
		for _, p := range st.Partitions {
			if p.Untranslatable {
				untranslatable++
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "translate: %v\n", err)
			if _, ok := errors.AsType[*connector.RewindError](err); ok {
				fmt.Fprintln(stderr, "translate: pass --allow-rewind to apply anyway")
			}
			return exitError
		}
		if untranslatable > 0 {
			fmt.Fprintf(stderr, "%d of %s cannot be translated exactly (see NOTE) and are never applied\n", untranslatable, plural(len(st.Partitions), "partition"))
		}
		if st.OffsetsFrom == connector.FromCheckpoints {
			fmt.Fprintf(stderr, "translated from the group's checkpoints on the target, the newest written %s ago (%s)\n", ageOf(st.CheckpointAt), orDash(st.SourceError))
		}
		if *apply {
			fmt.Fprintf(stderr, "committed %s to group %s on the target\n", plural(len(st.Partitions)-untranslatable, "partition"), *group)
		}
		return exitOK
	})
}
