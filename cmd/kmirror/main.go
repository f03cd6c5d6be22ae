// Command kmirror mirrors topics between Kafka clusters.
//
//	kmirror run --config kmirror.yaml       the worker
//	kmirror validate --config kmirror.yaml  check a config, with file:line errors
//	kmirror plan --config kmirror.yaml      what a pass would change, changing nothing
//	kmirror topics --config kmirror.yaml    the mirrored topics with their metadata
//	kmirror translate --config F --group G  a group's exact target offsets for a failover
//	kmirror demo                            everything on two embedded clusters
//	kmirror version
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/app"
	"github.com/kmirror/kmirror/internal/demo"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `kmirror mirrors topics from one Kafka cluster to another.

Usage:
  kmirror run --config FILE        run the mirrors in FILE until SIGINT/SIGTERM
  kmirror validate --config FILE   check FILE and exit 0 (valid) or 1 (errors, with file:line)
  kmirror plan --config FILE       print what one pass would create or change; change nothing
                                   (exit 0: nothing to do, 2: changes pending, 1: error)
  kmirror topics --config FILE     list the mirrored topics with their metadata
  kmirror translate --config FILE --group G [--apply [--allow-rewind]]
                                   a group's target offsets for a failover (exact);
                                   --apply commits them to the target group, never
                                   moving it backwards unless --allow-rewind
  kmirror demo [--duration D]      mirror between two embedded clusters, no setup
  kmirror version                  print the version

Run 'kmirror COMMAND --help' for a command's flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(args[1:], stdout, stderr)
	case "plan":
		return cmdPlan(args[1:], stdout, stderr)
	case "topics":
		return cmdTopics(args[1:], stdout, stderr)
	case "translate":
		return cmdTranslate(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "kmirror %s (%s)\n", getVersion(), runtime.Version())
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "kmirror: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func getVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kmirror %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		fs.PrintDefaults()
	}
	return fs
}

// parse returns the exit code to use when parsing ended the command
// (-1 to go on): 0 for --help, 2 for bad flags.
func parse(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return 2
	}
	return -1
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", "Checks a config file: syntax, unknown keys, every cross-field rule.\nErrors name the file, line and field. Exit status 0 when valid, 1 otherwise.", stderr)
	path := fs.String("config", "kmirror.yaml", "config file to check")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if _, err := config.LoadFile(*path); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid\n", *path)
	return 0
}

func cmdRun(args []string, stderr io.Writer) int {
	fs := newFlagSet("run", "Runs every mirror in the config until SIGINT or SIGTERM, then stops fetching,\nflushes the producer, persists progress and exits 0. Records the target has not\nacknowledged within shutdown_timeout are abandoned (copied again after a restart)\nand the exit status is 1. A second signal exits at once.", stderr)
	path := fs.String("config", "kmirror.yaml", "config file")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg, err := config.LoadFile(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	log := newLogger(stderr, cfg.Log)
	// Signals are turned into a context here and nowhere else, so the app
	// package stays embeddable.
	ctx, stop := shutdownContext(log, time.Duration(cfg.ShutdownTimeout))
	defer stop()
	a, err := app.New(app.Options{Config: cfg, Logger: log, Version: getVersion(), ConfigFile: *path})
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	// SIGHUP re-reads the config (as POST /api/v1/reload does); a config
	// that fails validation is rejected and the running one stays.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = a.Reload(ctx) // logs its own outcome
			}
		}
	}()
	log.Info("kmirror starting", "version", getVersion(), "config", *path, "mirrors", len(cfg.Mirrors))
	start := time.Now()
	if err := a.Run(ctx); err != nil {
		log.Error("kmirror stopped with an error", "err", err)
		return 1
	}
	log.Info("kmirror stopped", "uptime", time.Since(start).Round(time.Millisecond))
	return 0
}

// shutdownContext returns a context cancelled by the first SIGINT or
// SIGTERM: kmirror then stops within shutdown_timeout. A second signal
// exits at once, with status 1, without waiting for records in flight
// (their progress is not written, so a restart copies them again).
func shutdownContext(log *slog.Logger, timeout time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			log.Info("shutting down; a second signal exits at once", "signal", sig.String(), "shutdown_timeout", timeout)
			cancel()
		case <-done:
			return
		}
		select {
		case sig := <-sigs:
			log.Error("second signal: exiting now; records in flight will be copied again after a restart", "signal", sig.String())
			os.Exit(1)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "Starts two embedded Kafka clusters (kfake), seeds topics (one compacted, one with\nheaders) and a live producer, mirrors between them and prints what was mirrored\nand where the metrics and status are. Runs until Ctrl-C or --duration.", stderr)
	duration := fs.Duration("duration", 0, "stop after this long (0: run until Ctrl-C)")
	listen := fs.String("http", "127.0.0.1:9644", "HTTP listen address for /metrics and /api/v1/status")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	log := newLogger(stderr, config.Log{Level: "info", Format: "text"})
	if err := demo.Run(ctx, demo.Options{Out: stdout, Logger: log, HTTPListen: *listen, Version: getVersion()}); err != nil {
		log.Error("demo failed", "err", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, lc config.Log) *slog.Logger {
	var level slog.Level
	switch lc.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if lc.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// oneOf reports whether a flag's value is one of the allowed ones, and
// says which are when it is not.
func oneOf(stderr io.Writer, flagName, value string, allowed ...string) bool {
	if slices.Contains(allowed, value) {
		return true
	}
	fmt.Fprintf(stderr, "%s: unknown value %q (want %s)\n", flagName, value, strings.Join(allowed, " or "))
	return false
}

// loadForCommand loads the config named by a command's --config flag and
// builds a logger from it; on error it prints the error and returns nil.
func loadForCommand(path string, stderr io.Writer) (*config.Config, *slog.Logger) {
	cfg, err := config.LoadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil
	}
	lc := cfg.Log
	if lc.Level == "info" {
		lc.Level = "warn" // a one-shot command prints its result, not progress
	}
	return cfg, newLogger(stderr, lc)
}

func cmdPlan(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("plan", "Connects to the clusters and runs one pass of every mirror in dry-run mode: topics to\ncreate (checked by the target's controller with validateOnly), partitions to add and\nconfigs to change. Changes nothing, not even kmirror's own topics.\nExit status 0 when nothing would change, 2 when changes are pending, 1 on error.", stderr)
	path := fs.String("config", "kmirror.yaml", "config file")
	output := fs.String("o", "text", "output format: text or json")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if !oneOf(stderr, "-o", *output, "text", "json") {
		return 1
	}
	cfg, log := loadForCommand(*path, stderr)
	if cfg == nil {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	a, err := app.New(app.Options{Config: cfg, Logger: log, Version: getVersion()})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer a.Close()
	if err := a.StartPlugins(ctx); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var plans []*connector.Plan
	for _, m := range a.Mirrors() {
		p, err := m.Plan(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "plan: %v\n", err)
			return 1
		}
		plans = append(plans, p)
	}
	changes := false
	for _, p := range plans {
		changes = changes || p.Changes()
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"changes": changes, "mirrors": plans})
	} else {
		printPlans(stdout, plans)
	}
	if changes {
		return 2
	}
	return 0
}

func printPlans(w io.Writer, plans []*connector.Plan) {
	for _, p := range plans {
		fmt.Fprintf(w, "mirror %s:\n", p.Mirror)
		if !p.Changes() && len(p.Failed) == 0 {
			fmt.Fprintln(w, "  nothing to change")
		}
		for _, t := range p.Create {
			line := fmt.Sprintf("  + create %s (%d partitions) from %s", t.TargetTopic, t.Partitions, t.SourceTopic)
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
	}
}

func formatMap(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

func cmdTopics(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("topics", "Lists the mirrored topics with their metadata (provenance and labels), read from\neach mirror's metadata topic on its target cluster. No worker needs to run.", stderr)
	path := fs.String("config", "kmirror.yaml", "config file")
	mirror := fs.String("mirror", "", "only this mirror")
	output := fs.String("o", "table", "output format: table or json")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if !oneOf(stderr, "-o", *output, "table", "json") {
		return 1
	}
	cfg, log := loadForCommand(*path, stderr)
	if cfg == nil {
		return 1
	}
	var names []string
	if *mirror != "" {
		if cfg.Mirror(*mirror) == nil {
			fmt.Fprintf(stderr, "--mirror: no mirror named %q in %s\n", *mirror, *path)
			return 1
		}
		names = []string{*mirror}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	tms, err := app.ReadTopics(ctx, cfg, names, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if tms == nil {
			tms = []connector.TopicMetadata{}
		}
		_ = enc.Encode(map[string]any{"topics": tms})
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTARGET TOPIC\tSOURCE\tSTATE\tCREATED\tLABELS")
	for _, t := range tms {
		labels := map[string]string{}
		for k, v := range t.Metadata {
			if !strings.HasPrefix(k, "kmirror.") {
				labels[k] = v
			}
		}
		src := t.Metadata[connector.MetaSourceCluster] + "/" + t.SourceTopic
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Mirror, t.TargetTopic, src, t.Metadata[connector.MetaState], t.Metadata[connector.MetaCreatedAt], formatMap(labels))
	}
	_ = tw.Flush()
	return 0
}

func cmdTranslate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("translate", "Prints, for a failover, the target offset of every partition a source consumer group\ncommitted on: the target offset of the first mirrored record at or after its committed\nsource offset, read from the offset index kmirror keeps on the target. A consumer that\nstarts there reads exactly the records it had not read on the source. A partition whose\noffset cannot be translated exactly (older than the offset index, nothing copied yet) is\nprinted as untranslatable with the reason and never applied.\nWith --apply the offsets are committed to the group on the target: refused while it has\nactive members there, when its current offsets there cannot be read, and when it would\nmove a partition backwards (unless --allow-rewind).", stderr)
	path := fs.String("config", "kmirror.yaml", "config file")
	group := fs.String("group", "", "the consumer group (required)")
	mirror := fs.String("mirror", "", "the mirror (required when the config has several)")
	apply := fs.Bool("apply", false, "commit the translated offsets to the target group")
	allowRewind := fs.Bool("allow-rewind", false, "with --apply: commit even where that moves the target group backwards")
	output := fs.String("o", "table", "output format: table or json")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *group == "" {
		fmt.Fprintln(stderr, "--group is required")
		fs.Usage()
		return 2
	}
	if *allowRewind && !*apply {
		fmt.Fprintln(stderr, "--allow-rewind only applies with --apply")
		return 2
	}
	if !oneOf(stderr, "-o", *output, "table", "json") {
		return 1
	}
	cfg, log := loadForCommand(*path, stderr)
	if cfg == nil {
		return 1
	}
	name := *mirror
	switch {
	case name == "" && len(cfg.Mirrors) == 1:
		name = cfg.Mirrors[0].Name
	case name == "":
		fmt.Fprintf(stderr, "--mirror is required: %s has %d mirrors\n", *path, len(cfg.Mirrors))
		return 2
	case cfg.Mirror(name) == nil:
		fmt.Fprintf(stderr, "--mirror: no mirror named %q in %s\n", name, *path)
		return 1
	}
	a, err := app.New(app.Options{Config: cfg, Logger: log, Version: getVersion()})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var st connector.GroupStatus
	for _, m := range a.Mirrors() {
		if m.Name() == name {
			st, err = m.Translate(ctx, *group, connector.TranslateOptions{Apply: *apply, AllowRewind: *allowRewind})
		}
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	} else if len(st.Partitions) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SOURCE TOPIC\tPARTITION\tSOURCE OFFSET\tTARGET TOPIC\tTARGET OFFSET\tNOTE")
		for _, p := range st.Partitions {
			note, target := "exact", fmt.Sprint(p.TargetOffset)
			switch {
			case p.Untranslatable:
				note, target = "untranslatable: "+p.Reason, "-"
			case p.Behind:
				note = "behind: records before the source offset are not mirrored yet"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", p.SourceTopic, p.Partition, p.SourceOffset, p.TargetTopic, target, note)
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
		return 1
	}
	if untranslatable > 0 {
		fmt.Fprintf(stderr, "%d of %d partitions cannot be translated exactly (see NOTE) and are never applied\n", untranslatable, len(st.Partitions))
	}
	if *apply {
		fmt.Fprintf(stderr, "committed %d partitions to group %s on the target\n", len(st.Partitions)-untranslatable, *group)
	}
	return 0
}
