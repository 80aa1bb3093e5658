package routeguard_test

import (
	"encoding/json"
	"testing"

	"github.com/routeguard/routeguard"
)

func TestParseClass(t *testing.T) {
	tests := []struct {
		in   string
		want routeguard.Class
		ok   bool
	}{
		{"", routeguard.Unknown, true},
		{"apikey", routeguard.APIKey, true},
		{"API_KEY", routeguard.APIKey, true},
		{"api-key", routeguard.APIKey, true},
		{" OAuth ", routeguard.OAuth, true},
		{"local", routeguard.Local, true},
		{"token", routeguard.Unknown, false},
	}
	for _, tt := range tests {
		got, ok := routeguard.ParseClass(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseClass(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestClassText(t *testing.T) {
	for _, c := range []routeguard.Class{routeguard.Unknown, routeguard.APIKey, routeguard.OAuth, routeguard.Local} {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back routeguard.Class
		if err := json.Unmarshal(b, &back); err != nil || back != c {
			t.Errorf("round trip of %v through %s gave %v, %v", c, b, back, err)
		}
	}
	var c routeguard.Class
	err := json.Unmarshal([]byte(`"token"`), &c)
	if err == nil || err.Error() != `routeguard: unknown credential class "token" (want apikey, oauth or local)` {
		t.Fatalf("Unmarshal of an unknown class: %v", err)
	}
}
