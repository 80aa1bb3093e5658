//go:build !race

package combo

const raceEnabled = false
