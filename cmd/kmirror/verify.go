package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kmirror/kmirror/connector"
)

func cmdVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify", "Compares the mirror's copy with its source record by record (key, value, headers,\ntimestamp), through the offset index kmirror keeps on the target, over the range both\nhold: from the latest of the source's log start, the index's oldest offset and --since,\nup to the copy's position. Prints per partition and in total the records matched,\ndifferent, missing (the index names a target offset with no record, or a source record\nhas no index entry) and extra (target records in the copied range no source record maps\nto). Duplicates (kmirror's own at-least-once re-deliveries: an unindexed target record\nequal to a copy right after it) are counted apart and are no difference. A partition\nthat cannot be read is an error, never missing records.\nExit status: 0 every record matched, 3 a difference, 1 an error (a partition that could\nnot be compared), 2 bad flags.", stderr)
	path := configFlag(fs, "the config file")
	mirror := fs.String("mirror", "", "the mirror (required when the config has several)")
	topic := fs.String("topic", "", "only this source topic (or target topic)")
	since := fs.Duration("since", 0, "only source records with a timestamp at or after now minus this (0: all)")
	out := outputFlag(fs)
	timeout := timeoutFlag(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *since < 0 {
		fmt.Fprintln(stderr, "--since must not be negative")
		return exitUsage
	}
	return onMirror(*path, *mirror, *timeout, stderr, func(ctx context.Context, m *connector.Mirror) int {
		rep, err := m.Verify(ctx, connector.VerifyOptions{Topic: *topic, Since: *since})
		if err != nil {
			fmt.Fprintf(stderr, "verify: %v\n", err)
			return exitError
		}
		if out.JSON() {
			writeJSON(stdout, rep)
		} else {
			printVerify(stdout, rep)
		}
		switch {
		case rep.Errors > 0:
			fmt.Fprintf(stderr, "verify: %s could not be compared (see ERROR)\n", plural(rep.Errors, "partition"))
			return exitError
		case rep.Total.Differs():
			fmt.Fprintf(stderr, "verify: the copy differs from the source: %d different, %d missing, %d extra\n", rep.Total.Different, rep.Total.Missing, rep.Total.Extra)
			return exitNegative
		}
		return exitOK
	})
}

func printVerify(w io.Writer, rep connector.VerifyReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE TOPIC\tPARTITION\tSOURCE OFFSETS\tTARGET TOPIC\tTARGET OFFSETS\tMATCHED\tDIFFERENT\tMISSING\tEXTRA\tDUPLICATE\tERROR")
	for _, p := range rep.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%d-%d\t%s\t%d-%d\t%d\t%d\t%d\t%d\t%d\t%s\n", p.SourceTopic, p.Partition, p.SourceFrom, p.SourceTo,
			p.TargetTopic, p.TargetFrom, p.TargetTo, p.Matched, p.Different, p.Missing, p.Extra, p.Duplicate, p.Error)
	}
	t := rep.Total
	fmt.Fprintf(tw, "TOTAL\t\t\t\t\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Matched, t.Different, t.Missing, t.Extra, t.Duplicate, plural(rep.Errors, "error"))
	_ = tw.Flush()
	for _, p := range rep.Partitions {
		for _, d := range p.Differences {
			line := fmt.Sprintf("%s/%d: %s: source offset %s, target %s/%d offset %s", p.SourceTopic, p.Partition, d.Kind,
				offsetText(d.SourceOffset), p.TargetTopic, p.Partition, offsetText(d.TargetOffset))
			if len(d.Fields) > 0 {
				line += ": " + strings.Join(d.Fields, ", ") + " differ"
			}
			if d.Reason != "" {
				line += " (" + d.Reason + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
}

func offsetText(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}
