// Command kfakesrv runs one in-memory kfake cluster as its own process, so a
// benchmark can keep the brokers' CPU and memory out of the process it
// measures.
//
// It prints the brokers' addresses on one line of stdout, comma-separated,
// once they are listening, and shuts the cluster down on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	brokers := flag.Int("brokers", 3, "number of brokers")
	port := flag.Int("port", 0, "first broker port, the others follow it; 0 picks free ports")
	flag.Parse()

	opts := []kfake.Opt{kfake.NumBrokers(*brokers)}
	if *port > 0 {
		ports := make([]int, *brokers)
		for i := range ports {
			ports[i] = *port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	// Subscribe before listening so a signal sent as soon as the
	// addresses are printed is not lost.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfakesrv:", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(c.ListenAddrs(), ","))

	<-sig
	c.Close()
}
