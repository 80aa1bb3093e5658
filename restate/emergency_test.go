package restate

import (
	"errors"
	"testing"
)

func TestEmergencyFallback(t *testing.T) {
	target := EmergencyTarget{Provider: "nvidia", Model: "openai/gpt-oss-120b", MaxOutputTokens: 4096}
	tests := []struct {
		name   string
		status int
		body   string
		tools  bool
		want   bool
	}{
		{"402", 402, "", false, true},
		{"402 with tools", 402, "", true, false},
		{"500 out of credits", 500, "Out of credits", false, true},
		{"insufficient funds", 400, `{"error":"insufficient_funds"}`, false, true},
		{"portuguese", 400, "Saldo insuficiente", false, true},
		{"billing limit", 403, "Billing hard limit has been reached", false, true},
		{"billing quota", 403, "quota issue: see billing page", false, true},
		{"bare billing", 500, "internal error in the billing-address service of the upstream, please contact support", false, false},
		{"plain 500", 500, "boom", false, false},
	}
	c := &Classifier{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := c.EmergencyFallback(tt.status, []byte(tt.body), tt.tools)
			if ok != tt.want || (ok && got != target) || (!ok && got != (EmergencyTarget{})) {
				t.Errorf("EmergencyFallback(%d, %q, %v) = %+v, %v; want %v", tt.status, tt.body, tt.tools, got, ok, tt.want)
			}
		})
	}
}

func TestEmergencyFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	tests := []struct {
		name     string
		env      map[string]string
		disabled bool
		bad      bool
	}{
		{"unset", nil, false, false},
		{"zero", map[string]string{EnvEmergencyFallback: "0"}, true, false},
		{"false", map[string]string{EnvEmergencyFallback: " FALSE "}, true, false},
		{"true", map[string]string{EnvEmergencyFallback: "true"}, false, false},
		{"garbage keeps default", map[string]string{EnvEmergencyFallback: "maybe"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := FromEnv(env(tt.env))
			if s.EmergencyDisabled != tt.disabled || (err != nil) != tt.bad {
				t.Fatalf("FromEnv = %+v, %v", s, err)
			}
			var se *SettingError
			if tt.bad && (!errors.Is(err, ErrInvalidSetting) || !errors.As(err, &se) || se.Name != EnvEmergencyFallback) {
				t.Errorf("error %v does not match ErrInvalidSetting", err)
			}
			if s != s.Normalize() {
				t.Error("FromEnv result is not normalised")
			}
		})
	}
	if s, err := FromEnv(nil); err != nil || s != (Settings{}).Normalize() {
		t.Errorf("FromEnv(nil) = %+v, %v", s, err)
	}
	c := New(Settings{EmergencyDisabled: true})
	if _, ok := c.EmergencyFallback(402, nil, false); ok {
		t.Error("disabled emergency fallback triggered")
	}
}
