package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/connector"
)

func cmdFailback(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("failback", `Prepares a mirror to copy back, after a failover of mirror --reverse-of, only what
applications wrote to the former target since (the common disaster-recovery setup:
the identity policy, the same topic names; this mirror's source is the former
target, its target the former source):
  1. refuses unless the former mirror is fenced (kmirror failover or cutover);
  2. fences this mirror while it prepares it;
  3. per partition, starts this mirror's copy at the first record of the former
     target that is not a copy (from the former mirror's offset index), appended
     after the former source's end;
  4. reports the former source's divergent tail: the records it holds that never
     reached the former target (the data the failover lost), per partition with
     their offsets; they stay where they are, below where any translated group
     resumes;
  5. lifts this mirror's fence: kmirror run copies.
Consumer groups then translate back exactly: an offset inside what the former
mirror copied through its index backwards, a newer one through this mirror's own.`, stderr)
	path := configFlag(fs, "the config file")
	mirror := fs.String("mirror", "", "the mirror that copies back (required when the config has several)")
	reverseOf := fs.String("reverse-of", "", "the mirror that failed over (required)")
	out := outputFlag(fs)
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *reverseOf == "" {
		fmt.Fprintln(stderr, "--reverse-of is required: the mirror that failed over")
		fs.Usage()
		return exitUsage
	}
	return onMirror(*path, *mirror, *timeout, stderr, func(ctx context.Context, m *connector.Mirror) int {
		rep, err := m.Failback(ctx, *reverseOf)
		if out.JSON() {
			writeJSON(stdout, rep)
		} else if len(rep.Partitions) > 0 {
			fmt.Fprintf(stdout, "mirror %s copies back for %s: %d records of the former source never reached the former target (divergent tail)\n", rep.Mirror, rep.ReverseOf, rep.Divergent)
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOPY BACK FROM\tAPPENDED AT\tDIVERGENT OFFSETS\tDIVERGENT")
			for _, p := range rep.Partitions {
				div := "-"
				if p.DivergentCount > 0 {
					div = fmt.Sprintf("%d-%d", p.DivergentFrom, p.TargetEnd-1)
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\n", p.Topic, p.Partition, p.Start, p.TargetEnd, div, p.DivergentCount)
			}
			_ = tw.Flush()
		}
		if err != nil {
			fmt.Fprintf(stderr, "failback: %v\n", err)
			return exitError
		}
		fmt.Fprintf(stderr, "mirror %s is prepared and its fence lifted: start (or restart) kmirror run for it\n", rep.Mirror)
		return exitOK
	})
}
