package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/internal/app"
)

func cmdRun(args []string, stderr io.Writer) int {
	fs := newFlagSet("run", "Runs every mirror in the config until SIGINT or SIGTERM, then stops fetching,\nflushes the producer, persists progress and exits 0. Records the target has not\nacknowledged within shutdown_timeout are abandoned (copied again after a restart)\nand the exit status is 1. A second signal exits at once.", stderr)
	path := configFlag(fs, "the config file")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	cfg, err := config.LoadFile(*path)
	if err != nil {
		configError(stderr, *path, err)
		return exitError
	}
	log := newLogger(stderr, cfg.Log)
	// Signals are turned into a context here and nowhere else, so the app
	// package stays embeddable.
	ctx, stop := shutdownContext(log, time.Duration(cfg.ShutdownTimeout))
	defer stop()
	a, err := app.New(app.Options{Config: cfg, Logger: log, Version: getVersion(), ConfigFile: *path})
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitError
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
				_, _ = a.Reload(ctx) // logs its own outcome
			}
		}
	}()
	log.Info("kmirror starting", "version", getVersion(), "config", *path, "mirrors", len(cfg.Mirrors))
	start := time.Now()
	if err := a.Run(ctx); err != nil {
		log.Error("kmirror stopped with an error", "err", err)
		return exitError
	}
	log.Info("kmirror stopped", "uptime", time.Since(start).Round(time.Millisecond))
	return exitOK
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
