//go:build !race

package plugins_test

const raceEnabled = false
