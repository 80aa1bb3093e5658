package combo_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
)

func TestDegradeBackground(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     string
		degraded bool
		err      bool
	}{
		{"background true", `{"model":"m","background":true,"input":"hi"}`, `{"input":"hi","model":"m"}`, true, false},
		{"background false", `{"model":"m","background":false}`, `{"model":"m","background":false}`, false, false},
		{"no field", `{"model":"m"}`, `{"model":"m"}`, false, false},
		{"field only in a string", `{"input":"\"background\": true"}`, `{"input":"\"background\": true"}`, false, false},
		{"not a bool", `{"background":"yes"}`, `{"background":"yes"}`, false, false},
		{"escaped key", `{"backgr\u006fund":true,"model":"m"}`, `{"model":"m"}`, true, false},
		{"escape elsewhere", `{"input":"caf\u00e9","model":"m"}`, `{"input":"caf\u00e9","model":"m"}`, false, false},
		{"no HTML escaping", `{"background":true,"input":"a<b && c>d"}`, `{"input":"a<b && c>d"}`, true, false},
		{"nested field kept", `{"metadata":{"background":true}}`, `{"metadata":{"background":true}}`, false, false},
		{"array", `[1]`, `[1]`, false, true},
		{"empty", ``, ``, false, true},
		{"broken", `{"background":tru`, `{"background":tru`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, degraded, err := combo.DegradeBackground([]byte(tt.in))
			assert.Equal(t, tt.degraded, degraded)
			if tt.err {
				require.ErrorIs(t, err, combo.ErrNotJSONObject)
			} else {
				require.NoError(t, err)
			}
			if tt.degraded {
				assert.Equal(t, tt.want, string(out))
			} else {
				assert.Equal(t, tt.in, string(out))
			}
		})
	}
}

func FuzzDegradeBackground(f *testing.F) {
	f.Add([]byte(`{"background":true,"model":"m"}`))
	f.Add([]byte(`{"background":false}`))
	f.Add([]byte(`[true]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, degraded, err := combo.DegradeBackground(body)
		if err != nil {
			if degraded || !errors.Is(err, combo.ErrNotJSONObject) {
				t.Fatalf("error %v with degraded=%v", err, degraded)
			}
			return
		}
		if !degraded {
			if string(out) != string(body) {
				t.Fatalf("unchanged body rewritten")
			}
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("degraded body is not an object: %v", err)
		}
		if _, ok := m["background"]; ok {
			t.Fatalf("background field kept: %s", out)
		}
	})
}
