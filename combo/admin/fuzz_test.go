package admin_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/lease"
)

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		`{"action":"acquire","model":"openai/gpt-4o"}`,
		`{"action":"renew","generation":3}`,
		`{"action":"release","generation":2,"reason":"CLIENT_CANCELLED"}`,
		`{"action":"status","generation":1}`,
		`{"action":"renew","generation":1.0}`,
		`{"action":"acquire","model":"m","x":1}`,
		`[1,2]`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := admin.ParseLeaseCommand(body)
		if err != nil {
			if !errors.Is(err, admin.ErrActionInvalid) || c != (admin.LeaseCommand{}) {
				t.Fatalf("ParseCommand(%q) = %+v, %v", body, c, err)
			}
			return
		}
		// Rebuild the canonical body and parse it again.
		canon := map[string]any{"action": c.Action}
		switch c.Action {
		case "acquire":
			n := utf8.RuneCountInString(c.Model)
			if n < 1 || n > admin.MaxModelLen || c.Model != strings.TrimSpace(c.Model) || c.Generation != 0 {
				t.Fatalf("ParseCommand(%q) = %+v: bad acquire", body, c)
			}
			canon["model"] = c.Model
		case "renew", "status", "release":
			if c.Generation < 1 || c.Generation > lease.MaxGeneration || c.Model != "" {
				t.Fatalf("ParseCommand(%q) = %+v: bad generation", body, c)
			}
			canon["generation"] = c.Generation
			if c.Action == "release" {
				if c.Reason != lease.ReasonOwnerExit && c.Reason != lease.ReasonClientCancelled {
					t.Fatalf("ParseCommand(%q) = %+v: bad reason", body, c)
				}
				canon["reason"] = string(c.Reason)
			} else if c.Reason != "" {
				t.Fatalf("ParseCommand(%q) = %+v: reason outside release", body, c)
			}
		default:
			t.Fatalf("ParseCommand(%q) = %+v: unknown action", body, c)
		}
		again, err := json.Marshal(canon)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := admin.ParseLeaseCommand(again)
		if err != nil || c2 != c {
			t.Fatalf("canonical %s parsed to %+v, %v; want %+v", again, c2, err, c)
		}
	})
}

func BenchmarkParseCommand(b *testing.B) {
	body := []byte(`{"action":"release","generation":12,"reason":"CLIENT_CANCELLED"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := admin.ParseLeaseCommand(body); err != nil {
			b.Fatal(err)
		}
	}
}
