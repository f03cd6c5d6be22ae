//go:build pprof

// Profiling for benchmarks: built with -tags pprof, kmirror serves
// net/http/pprof on the address in KMIRROR_PPROF (loopback only). Not in
// release builds: the profiles show everything the process holds.
package main

import (
	"log"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("KMIRROR_PPROF")
	if addr == "" {
		return
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("KMIRROR_PPROF=%q: want a loopback host:port", addr)
	}
	go func() { log.Print(http.ListenAndServe(addr, nil)) }()
}
