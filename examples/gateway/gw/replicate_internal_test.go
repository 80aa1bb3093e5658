package gw

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/routeguard/routeguard/cooldown"
)

// The cooldown hook warns when the Tracker forgets a terminal state to
// stay within its cap, and stays quiet for every other drop and change.
func TestWarnForgottenTerminal(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name string
		ev   cooldown.Event
		want string // "" means no record
	}{
		{"max_terminal", cooldown.Event{Conn: "c1", Provider: "p", At: at, Action: cooldown.Dropped, From: cooldown.Banned, Removed: true, Cause: "max_terminal"},
			`level=WARN msg="cooldown: terminal state forgotten to stay within the cap; the connection is eligible again" connection=c1 provider=p state=banned` + "\n"},
		{"idle", cooldown.Event{Conn: "c1", Provider: "p", At: at, Action: cooldown.Dropped, Removed: true, Cause: "idle"}, ""},
		{"max_entries", cooldown.Event{Conn: "c1", Provider: "p", At: at, Action: cooldown.Dropped, From: cooldown.Cooling, Removed: true, Cause: "max_entries"}, ""},
		{"episode", cooldown.Event{Conn: "c1", Provider: "p", At: at, Action: cooldown.Episode, State: cooldown.Cooling}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := &Server{logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				}}))}
			s.warnForgotten(tc.ev)
			assert.Equal(t, tc.want, buf.String())
		})
	}
	(&Server{}).warnForgotten(cases[0].ev) // no logger: nothing, no panic
}
