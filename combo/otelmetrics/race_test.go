//go:build race

package otelmetrics_test

// raceEnabled: sync.Pool drops items at random under the race detector.
const raceEnabled = true
