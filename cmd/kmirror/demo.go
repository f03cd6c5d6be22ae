package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/internal/demo"
)

func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "Starts two embedded Kafka clusters (kfake), seeds topics (orders written in\ntransactions, one compacted, one with headers) and a live producer, prints the\nconfig it runs, then every 5s what was mirrored and a consumer group's offsets\ntranslated to the target (different from the source's: the transaction markers\nare not copied), and where the status page and metrics are. Runs until Ctrl-C or\n--duration, then prints a closing summary.", stderr)
	duration := fs.Duration("duration", 0, "stop after this long (0: run until Ctrl-C)")
	listen := fs.String("http", "127.0.0.1:9644", "HTTP listen address for the status page, /metrics and /api/v1/status")
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
		return exitError
	}
	return exitOK
}
