package gw

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Streams get an attempt deadline by default: a configuration that does not
// mention attemptDeadlineMs (or sets it to null) gives the router's
// watchdog 5 min; a value is used as milliseconds, and an explicit 0 or a
// negative value turns the deadline off. The readiness timeout is left to
// the watchdog's own default (on, 120 s).
func TestAttemptDeadlineDefaultsOn(t *testing.T) {
	const demoWatchdog = `"throughputWatchdog": {"idleTimeoutMs": 10000}`
	require.Contains(t, string(DemoConfigJSON()), demoWatchdog, "the demo configuration's watchdog section")
	for _, tc := range []struct {
		name  string
		field string // added to the demo's watchdog section
		want  time.Duration
	}{
		{"absent", ``, 5 * time.Minute},
		{"null", `, "attemptDeadlineMs": null`, 5 * time.Minute},
		{"set", `, "attemptDeadlineMs": 1500`, 1500 * time.Millisecond},
		{"zero turns it off", `, "attemptDeadlineMs": 0`, 0},
		{"negative turns it off", `, "attemptDeadlineMs": -5`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := strings.Replace(string(DemoConfigJSON()), demoWatchdog,
				`"throughputWatchdog": {"idleTimeoutMs": 10000`+tc.field+`}`, 1)
			cfg, err := Decode([]byte(data))
			require.NoError(t, err)
			s, err := New(cfg, Options{})
			require.NoError(t, err)
			defer s.Close()
			wd := s.layers.Watchdog
			assert.Equal(t, tc.want, wd.AttemptDeadline, "the router's attempt deadline")
			assert.Nil(t, wd.ReadinessTimeout, "the readiness timeout keeps the watchdog's default")
			assert.Equal(t, 10*time.Second, wd.IdleTimeout)
		})
	}
	assert.Equal(t, 5*time.Minute, DefaultAttemptDeadline)
}
