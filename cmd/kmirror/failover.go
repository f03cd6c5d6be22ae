package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/connector"
)

func cmdFailover(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("failover", `Moves a mirror's consumers to its target, the source reachable or not:
  1. fences the mirror: every worker of it stops copying, persists its progress
     and leaves its group (it stays fenced until kmirror failback lifts it);
  2. waits for the workers to be gone;
  3. translates every group kmirror checkpointed (or --group) through the offset
     index and commits it on the target: from the source's offsets when the
     source answers within --source-timeout, else from the checkpoints on the
     target (with their age);
  4. prints the recovery point: per partition, how far the copy goes and how
     many source records, as far as kmirror last saw the source's end, it lacks.
Exit 0 only when every group was applied with every partition exact. It is
safe to run again.`, stderr)
	path := configFlag(fs, "the config file")
	mirror := fs.String("mirror", "", "the mirror (required when the config has several)")
	var groups stringList
	fs.Var(&groups, "group", "translate only this group (repeatable; default every group checkpointed)")
	sourceTimeout := fs.Duration("source-timeout", 10*time.Second, "how long to try the source before translating the checkpoints stored on the target")
	fromCheckpoints := fs.Bool("from-checkpoints", false, "never ask the source: translate the checkpoints")
	allowRewind := fs.Bool("allow-rewind", false, "commit even where that moves a target group backwards")
	reason := fs.String("reason", "failover", "why, written with the fence")
	out := outputFlag(fs)
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long (the workers must leave within it)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	return onMirror(*path, *mirror, *timeout, stderr, func(ctx context.Context, m *connector.Mirror) int {
		rep, err := m.Failover(ctx, connector.FailoverOptions{
			Groups: groups, SourceTimeout: *sourceTimeout, FromCheckpoints: *fromCheckpoints,
			AllowRewind: *allowRewind, Reason: *reason,
		})
		if out.JSON() {
			writeJSON(stdout, rep)
		} else {
			printFailover(stdout, rep)
		}
		if err != nil {
			fmt.Fprintf(stderr, "failover: %v\n", err)
			return exitError
		}
		return exitOK
	})
}

// printFailover prints the report as tables: the fence, the recovery point,
// the groups.
func printFailover(w io.Writer, rep connector.FailoverReport) {
	if rep.Fence != "" {
		fmt.Fprintf(w, "mirror %s: %s\n", rep.Mirror, rep.Fence)
	}
	if rep.SourceError != "" {
		fmt.Fprintf(w, "source not reachable: %s\n", rep.SourceError)
	}
	if len(rep.RecoveryPoint) > 0 {
		fmt.Fprintf(w, "\nRecovery point: %d source records not copied (as far as the source's last seen end tells)\n", rep.NotCopied)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SOURCE TOPIC\tPARTITION\tCOPIED TO\tSOURCE END\tNOT COPIED")
		for _, p := range rep.RecoveryPoint {
			end := fmt.Sprint(p.SourceEnd)
			if p.SourceEnd < 0 {
				end = "unknown"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\n", p.SourceTopic, p.Partition, p.CopiedTo, end, p.NotCopied)
		}
		_ = tw.Flush()
	}
	if len(rep.Groups) > 0 {
		fmt.Fprintln(w, "\nGroups:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tFROM\tAGE\tPARTITIONS\tAPPLIED\tNOTE")
		for _, g := range rep.Groups {
			age := "-"
			if g.OffsetsFrom == connector.FromCheckpoints {
				age = ageOf(g.CheckpointAt)
			}
			applied := "yes"
			if !g.Applied {
				applied = "no"
			}
			var notes []string
			for _, p := range g.Partitions {
				if p.Untranslatable {
					notes = append(notes, fmt.Sprintf("%s/%d untranslatable: %s", p.SourceTopic, p.Partition, p.Reason))
				}
			}
			if g.ApplyErr != "" {
				notes = append(notes, g.ApplyErr)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", g.Group, orDash(g.OffsetsFrom), age, len(g.Partitions), applied, orDash(strings.Join(notes, "; ")))
		}
		_ = tw.Flush()
	}
}
