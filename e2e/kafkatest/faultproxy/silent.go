package faultproxy

import (
	"net"
	"sync"
)

// Silent is a broker that accepts connections and never answers: a hung
// broker, or a port that is not a Kafka listener. Unlike a proxy with
// Silence, it needs no cluster behind it.
type Silent struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// NewSilent listens on a loopback port.
func NewSilent() (*Silent, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Silent{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	})
	return s, nil
}

// Addr is the "host:port" to use as a bootstrap server.
func (s *Silent) Addr() string { return s.ln.Addr().String() }

// Close stops listening and closes every connection it accepted.
func (s *Silent) Close() {
	_ = s.ln.Close()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// ClosedPort returns a loopback address nothing listens at (a broker that
// is down): a port just released.
func ClosedPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}
