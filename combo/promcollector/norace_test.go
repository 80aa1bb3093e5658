//go:build !race

package promcollector_test

const raceEnabled = false
