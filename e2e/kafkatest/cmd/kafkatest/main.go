// Command kafkatest fetches the Apache Kafka jars the e2e tests run, or
// starts real single-node KRaft clusters by hand.
//
//	go run ./e2e/kafkatest/cmd/kafkatest fetch        # warm the jar cache (CI does this before the tests)
//	go run ./e2e/kafkatest/cmd/kafkatest up [-n 2]    # start clusters, print their addresses, stop on Ctrl-C
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "fetch":
		err = fetch()
	case "up":
		err = up(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkatest:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  kafkatest fetch          fetch the Apache Kafka %s jars into the cache (%s, default $HOME/.cache/kmirror/kafka-%s)
  kafkatest up [-n N]      start N single-node clusters (default 2) and run until Ctrl-C
`, kafkatest.Version, kafkatest.HomeEnv, kafkatest.Version)
	os.Exit(2)
}

func runtime(ctx context.Context) (*kafkatest.Runtime, error) {
	rt, err := kafkatest.Find()
	if err != nil {
		return nil, err
	}
	if err := rt.Ensure(ctx, os.Stderr); err != nil {
		return nil, err
	}
	return rt, nil
}

func fetch() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	rt, err := runtime(ctx)
	if err != nil {
		return err
	}
	jars, _ := filepath.Glob(filepath.Join(rt.Home, "lib", "*.jar"))
	fmt.Printf("Apache Kafka %s: %d jars in %s\n", kafkatest.Version, len(jars), filepath.Join(rt.Home, "lib"))
	return nil
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	n := fs.Int("n", 2, "number of clusters")
	dir := fs.String("dir", "", "directory for the clusters' data and logs (default: a new temporary directory)")
	_ = fs.Parse(args)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rt, err := runtime(ctx)
	if err != nil {
		return err
	}
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "kafkatest-"); err != nil {
			return err
		}
	}
	begin := time.Now()
	clusters := make([]*kafkatest.Cluster, *n)
	errs := make([]error, *n)
	var wg sync.WaitGroup
	for i := range clusters {
		c, err := rt.NewCluster(kafkatest.Config{Name: fmt.Sprintf("c%d", i+1), Dir: filepath.Join(*dir, fmt.Sprintf("c%d", i+1))})
		if err != nil {
			return err
		}
		clusters[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Start(ctx)
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range clusters {
			_ = c.Stop(30 * time.Second)
		}
	}()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	fmt.Printf("%d clusters ready in %v (logs and data under %s):\n", *n, time.Since(begin).Round(10*time.Millisecond), *dir)
	for _, c := range clusters {
		fmt.Printf("  %s  bootstrap %s  log %s\n", c.Name(), c.Addr(kafkatest.PLAINTEXT), c.LogPath())
	}
	fmt.Println("Ctrl-C stops them.")
	<-ctx.Done()
	return nil
}
