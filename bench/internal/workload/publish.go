package workload

import (
	"fmt"
	"log"
	"os"
)

// Publish prints a benchmark report and, when every run passed, writes it
// to out as well (a failed or interrupted run leaves the last good results
// in place). It returns the process exit code.
func Publish(report, out string, failed error) int {
	fmt.Print(report)
	if out != "" && failed == nil {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			log.Printf("could not write %s: %v", out, err)
		} else {
			log.Printf("wrote %s", out)
		}
	}
	if failed != nil {
		return 1
	}
	return 0
}
