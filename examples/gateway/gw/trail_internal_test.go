package gw

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/routeguard/routeguard/combo"
)

// The trail has one entry per attempt, provider/model;outcome;status;
// reason;ms, and never a connection id or free text.
func TestTrailEntries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts []combo.Attempt
		want     string
	}{
		{"none", nil, ""},
		{"fallback", []combo.Attempt{
			{Target: combo.Target{Provider: "openai", Connection: "sk-1", Model: "gpt-4o"}, Outcome: combo.OutcomeFailed,
				Status: 503, Code: "server_error", Duration: 1234 * time.Millisecond},
			{Target: combo.Target{Provider: "anthropic", Connection: "ak-1", Model: "claude-sonnet-4.5"}, Outcome: combo.OutcomeSucceeded,
				Status: 200, Duration: 87*time.Millisecond + 900*time.Microsecond},
		}, "openai/gpt-4o;failed;503;server_error;1234,anthropic/claude-sonnet-4.5;succeeded;200;;87"},
		{"skip and transport retry", []combo.Attempt{
			{Target: combo.Target{Provider: "p", Connection: "p-1", Model: "m"}, Outcome: combo.OutcomeSkipped,
				Reason: combo.ReasonCircuitOpen, Code: "breaker open for 30s"},
			{Target: combo.Target{Provider: "q", Connection: "q-1", Model: "m"}, Outcome: combo.OutcomeFailed,
				Code: "retry_same_target", Duration: 5 * time.Millisecond},
		}, "p/m;skipped;0;" + string(combo.ReasonCircuitOpen) + ";0,q/m;failed;0;retry_same_target;5"},
		{"free text and separators neutralized", []combo.Attempt{
			{Target: combo.Target{Provider: "a,b", Model: "m;x y\r\n"}, Outcome: combo.OutcomeFailed, Status: 400,
				Code: "Bad request: see docs"},
		}, "a_b/m_x_y__;failed;400;other;0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := trail(tc.attempts)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, "sk-1")
			assert.NotContains(t, got, "p-1")
		})
	}
}

// A long trail stays within maxTrail bytes: the entries that do not fit
// are counted in a last "+N", and every attempt is accounted for.
func TestTrailBounded(t *testing.T) {
	for _, n := range []int{1, 10, 45, 46, 47, 100, 1000} {
		attempts := make([]combo.Attempt, n)
		for i := range attempts {
			attempts[i] = combo.Attempt{Target: combo.Target{Provider: "provider-" + strconv.Itoa(i), Model: "model-name"},
				Outcome: combo.OutcomeFailed, Status: 503, Code: "server_error", Duration: 12345 * time.Millisecond}
		}
		got := trail(attempts)
		assert.LessOrEqual(t, len(got), maxTrail, "n=%d", n)
		entries := strings.Split(got, ",")
		last := entries[len(entries)-1]
		if more, ok := strings.CutPrefix(last, "+"); ok {
			m, err := strconv.Atoi(more)
			assert.NoError(t, err)
			assert.Equal(t, n, len(entries)-1+m, "n=%d: shown and counted", n)
		} else {
			assert.Len(t, entries, n)
		}
	}
}
