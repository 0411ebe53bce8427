//go:build race

package main

// raceEnabled reports that the tests run with the race detector, so the
// binary they build uses it too (and the same build cache).
const raceEnabled = true
