//go:build race

package plugins_test

// raceEnabled makes the examples build with -race too: their dependencies
// are then already in the build cache from compiling this test.
const raceEnabled = true
