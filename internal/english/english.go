// Package english writes counts for people to read, the same everywhere
// kmirror does (the CLI, the status page's history, errors).
package english

import "strconv"

// Count is n with noun, in the plural unless n is 1: "1 group",
// "3 groups", "0 groups". noun takes an s in the plural.
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
