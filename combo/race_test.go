//go:build race

package combo

// raceEnabled: sync.Pool drops items at random under the race detector,
// so allocation counts are compared only without it.
const raceEnabled = true
