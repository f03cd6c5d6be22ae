package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/connector"
	"github.com/kmirror/kmirror/internal/app"
)

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
