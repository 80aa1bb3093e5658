package admin_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/lease"
)

func TestParseCommand(t *testing.T) {
	valid := []struct {
		body string
		want admin.LeaseCommand
	}{
		{`{"action":"acquire","model":" openai/gpt-4o "}`, admin.LeaseCommand{Action: "acquire", Model: "openai/gpt-4o"}},
		{`{"action":"acquire","model":"m","generation":7}`, admin.LeaseCommand{Action: "acquire", Model: "m"}},
		{`{"action":"renew","generation":3}`, admin.LeaseCommand{Action: "renew", Generation: 3}},
		{` { "generation" : 9007199254740991 , "action" : "status" } `, admin.LeaseCommand{Action: "status", Generation: lease.MaxGeneration}},
		{`{"action":"release","generation":2}`, admin.LeaseCommand{Action: "release", Generation: 2, Reason: lease.ReasonOwnerExit}},
		{`{"action":"release","generation":2,"reason":"CLIENT_CANCELLED"}`, admin.LeaseCommand{Action: "release", Generation: 2, Reason: lease.ReasonClientCancelled}},
		{`{"action":"acquire","model":"` + strings.Repeat("é", 512) + `"}`, admin.LeaseCommand{Action: "acquire", Model: strings.Repeat("é", 512)}},
	}
	for _, c := range valid {
		got, err := admin.ParseLeaseCommand([]byte(c.body))
		require.NoError(t, err, c.body)
		assert.Equal(t, c.want, got, c.body)
	}
	invalid := []string{
		``, `null`, `[]`, `"acquire"`, `{`, `{}`,
		`{"action":"steal"}`,
		`{"action":"ACQUIRE","model":"m"}`,
		`{"action":1}`,
		`{"action":"acquire"}`,
		`{"action":"acquire","model":"   "}`,
		`{"action":"acquire","model":null}`,
		`{"action":"acquire","model":5}`,
		`{"action":"acquire","model":"` + strings.Repeat("a", 513) + `"}`,
		`{"action":"acquire","model":"m","extra":1}`,
		`{"action":"acquire","model":"m","reason":"OWNER_EXIT"}`,
		`{"action":"acquire","model":"m","generation":0}`,
		`{"Action":"renew","generation":1}`,
		`{"action":"renew"}`,
		`{"action":"renew","generation":0}`,
		`{"action":"renew","generation":-1}`,
		`{"action":"renew","generation":1.5}`,
		`{"action":"renew","generation":1.0}`,
		`{"action":"renew","generation":1e2}`,
		`{"action":"renew","generation":"1"}`,
		`{"action":"renew","generation":null}`,
		`{"action":"renew","generation":9007199254740992}`,
		`{"action":"renew","generation":1,"model":"m"}`,
		`{"action":"renew","generation":1,"reason":"OWNER_EXIT"}`,
		`{"action":"status","generation":1} {}`,
		`{"action":"release","generation":1,"reason":"TTL_EXPIRED"}`,
		`{"action":"release","generation":1,"reason":null}`,
	}
	for _, body := range invalid {
		_, err := admin.ParseLeaseCommand([]byte(body))
		assert.ErrorIs(t, err, admin.ErrActionInvalid, "ParseCommand(%s)", body)
	}
}
