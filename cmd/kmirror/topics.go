package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/app"
)

func cmdTopics(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("topics", "Lists the mirrored topics with their metadata (provenance and labels), read from\neach mirror's metadata topic on its target cluster. No worker needs to run.", stderr)
	path := configFlag(fs, "the config file")
	mirror := fs.String("mirror", "", "only this mirror")
	out := outputFlag(fs)
	timeout := timeoutFlag(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg, log := loadForCommand(*path, stderr)
	if cfg == nil {
		return exitError
	}
	var names []string
	if *mirror != "" {
		if cfg.Mirror(*mirror) == nil {
			fmt.Fprintf(stderr, "--mirror: no mirror named %q in %s\n", *mirror, *path)
			return exitError
		}
		names = []string{*mirror}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	tms, err := app.ReadTopics(ctx, cfg, names, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	if out.JSON() {
		if tms == nil {
			tms = []connector.TopicMetadata{}
		}
		writeJSON(stdout, map[string]any{"topics": tms})
		return exitOK
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
	return exitOK
}
