package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/kmirror/kmirror/config"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/app"
)

// kmirror-prof is kmirror wired exactly as `kmirror run` wires it
// (config.LoadFile, app.New, app.Run), but inside this binary so that it
// can write a CPU profile (the kmirror binary has no pprof endpoint). It
// is only run when asked for (-contenders ...,kmirror-prof -cpuprofile F).
func startKmirrorProf(e *env, p *pair, s spec, dir string) (*kafkatest.Process, string, error) {
	cfg := kmirrorConfig(p, s)
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, "", err
	}
	prof := e.cpuprofile
	if prof == "" {
		prof = filepath.Join(dir, "cpu.pprof")
	}
	cmd := exec.Command(e.self, "kmirror-child", "-config", path, "-cpuprofile", prof)
	proc, err := kafkatest.StartProcess(cmd, filepath.Join(dir, "kmirror.log"))
	return proc, fmt.Sprintf("kmirror in-process (internal/app) with a CPU profile to %s\n%s", prof, cfg), err
}

func kmirrorChild(args []string) int {
	fs := flag.NewFlagSet("kmirror-child", flag.ExitOnError)
	path := fs.String("config", "", "config file")
	prof := fs.String("cpuprofile", "", "CPU profile file")
	_ = fs.Parse(args)
	cfg, err := config.LoadFile(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f, err := os.Create(*prof)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pprof.StopCPUProfile()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a, err := app.New(app.Options{Config: cfg, Logger: log, Version: "bench", ConfigFile: *path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
