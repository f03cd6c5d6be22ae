package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/connector"
)

func cmdCutover(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cutover", `Moves a mirror's consumers to its target in a planned switch (a migration, or the
switch back after a failback), behind a gate. With the producers on the source
stopped and kmirror run still copying:
  1. waits (up to --timeout) until every partition's stored position is at the
     source's end and the source's ends stayed put for --quiet;
  2. checks the copy record by record (as kmirror verify);
  3. checks that every checkpointed group translates exactly;
  4. fences the mirror and waits for its workers to persist their last progress;
  5. commits every group on the target from the final positions.
Exit 0 only when every partition and group is exact; otherwise it says which and
why, and nothing before step 4 changed anything.`, stderr)
	path := configFlag(fs, "the config file")
	mirror := fs.String("mirror", "", "the mirror (required when the config has several)")
	quiet := fs.Duration("quiet", 5*time.Second, "how long the source must take no record before the gate opens")
	verifySince := fs.Duration("verify-since", 0, "check only the records this recent (0: everything the offset index covers)")
	allowRewind := fs.Bool("allow-rewind", false, "commit even where that moves a target group backwards")
	reason := fs.String("reason", "cutover", "why, written with the fence")
	out := outputFlag(fs)
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	return onMirror(*path, *mirror, *timeout, stderr, func(ctx context.Context, m *connector.Mirror) int {
		rep, err := m.Cutover(ctx, connector.CutoverOptions{Quiet: *quiet, VerifySince: *verifySince, AllowRewind: *allowRewind, Reason: *reason})
		if out.JSON() {
			writeJSON(stdout, rep)
		} else {
			printCutover(stdout, rep)
		}
		if err != nil {
			fmt.Fprintf(stderr, "cutover: %v\n", err)
			return exitError
		}
		return exitOK
	})
}

func printCutover(w io.Writer, rep connector.CutoverReport) {
	if len(rep.Lagging) > 0 {
		fmt.Fprintln(w, "Not caught up:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SOURCE TOPIC\tPARTITION\tCOPIED TO\tSOURCE END\tSOURCE STILL WRITTEN")
		for _, p := range rep.Lagging {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%v\n", p.SourceTopic, p.Partition, p.CopiedTo, p.SourceEnd, p.Moving)
		}
		_ = tw.Flush()
	}
	if v := rep.Verify; v != nil {
		fmt.Fprintf(w, "copy checked: %d matched, %d different, %d missing, %d extra, %d partitions not compared\n", v.Total.Matched, v.Total.Different, v.Total.Missing, v.Total.Extra, v.Errors)
	}
	if len(rep.Groups) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tPARTITIONS\tEXACT\tCOMMITTED\tNOTE")
		for _, g := range rep.Groups {
			fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%s\n", g.Group, len(g.Partitions), g.Exact, g.Applied, orDash(g.ApplyErr))
		}
		_ = tw.Flush()
	}
	if rep.Fence != "" {
		fmt.Fprintf(w, "mirror %s: %s\n", rep.Mirror, rep.Fence)
	}
}
