package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/app"
)

func cmdPlan(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("plan", "Connects to the clusters and runs one pass of every mirror in dry-run mode: topics to\ncreate (checked by the target's controller with validateOnly), partitions to add and\nconfigs to change; and what would keep run from copying (a fenced mirror, MirrorMaker 2's\noffsets topic missing or unreadable with mirrors[].mm2.adopt). Changes nothing, not even\nkmirror's own topics.\nExit status 0 when nothing would change and nothing blocks run, 3 when changes are pending\nor run would be blocked, 1 on error, 2 on bad usage.", stderr)
	path := configFlag(fs, "the config file")
	out := outputFlag(fs, "text")
	timeout := timeoutFlag(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg, log := loadForCommand(*path, stderr)
	if cfg == nil {
		return exitError
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	a, err := app.New(app.Options{Config: cfg, Logger: log, Version: getVersion()})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	defer a.Close()
	if err := a.StartPlugins(ctx); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	var plans []*connector.Plan
	for _, m := range a.Mirrors() {
		p, err := m.Plan(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "plan: %v\n", err)
			return exitError
		}
		plans = append(plans, p)
	}
	changes, blocked := false, false
	for _, p := range plans {
		changes = changes || p.Changes()
		blocked = blocked || len(p.Blocked) > 0
	}
	if out.JSON() {
		for _, p := range plans {
			emptyNotNull(p)
		}
		writeJSON(stdout, map[string]any{"changes": changes, "mirrors": plans})
	} else {
		printPlans(stdout, plans)
	}
	if changes || blocked {
		// Not 2, as terraform plan -detailed-exitcode has it: that is a
		// bad flag here, which a CI gate must not take for changes. A
		// run that would copy nothing is not "nothing to do" either.
		return exitNegative
	}
	return exitOK
}

// emptyNotNull makes p's lists [] in JSON rather than null, so a consumer
// can iterate them without a null check.
func emptyNotNull(p *connector.Plan) {
	if p.Create == nil {
		p.Create = []connector.PlannedTopic{}
	}
	if p.Grow == nil {
		p.Grow = []connector.PlannedGrowth{}
	}
	if p.Configs == nil {
		p.Configs = []connector.PlannedConfig{}
	}
	if p.Failed == nil {
		p.Failed = []connector.TopicStatus{}
	}
	if p.Blocked == nil {
		p.Blocked = []connector.PlanBlocker{}
	}
}

func printPlans(w io.Writer, plans []*connector.Plan) {
	for _, p := range plans {
		fmt.Fprintf(w, "mirror %s:\n", p.Mirror)
		if !p.Changes() && len(p.Failed) == 0 && len(p.Blocked) == 0 {
			fmt.Fprintln(w, "  nothing to change")
		}
		for _, t := range p.Create {
			line := fmt.Sprintf("  + create %s (%s) from %s", t.TargetTopic, plural(int(t.Partitions), "partition"), t.SourceTopic)
			if len(t.Configs) > 0 {
				line += " with " + formatMap(t.Configs)
			}
			if t.Error != "" {
				line += "\n      ! the target would refuse it: " + t.Error
			}
			fmt.Fprintln(w, line)
		}
		for _, g := range p.Grow {
			line := fmt.Sprintf("  ~ grow %s from %d to %d partitions", g.TargetTopic, g.From, g.To)
			if g.Error != "" {
				line += "\n      ! the target would refuse it: " + g.Error
			}
			fmt.Fprintln(w, line)
		}
		for _, c := range p.Configs {
			fmt.Fprintf(w, "  ~ configs of %s:", c.TargetTopic)
			if len(c.Set) > 0 {
				fmt.Fprintf(w, " set %s", formatMap(c.Set))
			}
			if len(c.Delete) > 0 {
				fmt.Fprintf(w, " delete %s", strings.Join(c.Delete, ", "))
			}
			fmt.Fprintln(w)
		}
		for _, f := range p.Failed {
			fmt.Fprintf(w, "  ! %s is failed and would not be touched: %s\n", f.SourceTopic, f.Error)
		}
		for _, b := range p.Blocked {
			fmt.Fprintf(w, "  ! run would copy nothing of %s: %s\n", topicList(b.Topics), b.Error)
		}
	}
}

// topicList names a few topics and counts the rest: a blocker may hold
// back thousands.
func topicList(topics []string) string {
	const shown = 3
	if len(topics) <= shown {
		return strings.Join(topics, ", ")
	}
	return fmt.Sprintf("%s and %s", strings.Join(topics[:shown], ", "), plural(len(topics)-shown, "more topic"))
}

func formatMap(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}
