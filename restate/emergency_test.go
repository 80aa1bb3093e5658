package restate

import (
	"errors"
	"strings"
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
		{"zero", map[string]string{envEmergencyFallback: "0"}, true, false},
		{"false", map[string]string{envEmergencyFallback: " FALSE "}, true, false},
		{"true", map[string]string{envEmergencyFallback: "true"}, false, false},
		{"off", map[string]string{envEmergencyFallback: "Off"}, true, false},
		{"no", map[string]string{envEmergencyFallback: "no"}, true, false},
		{"on", map[string]string{envEmergencyFallback: "ON"}, false, false},
		{"yes", map[string]string{envEmergencyFallback: "yes"}, false, false},
		{"1", map[string]string{envEmergencyFallback: "1"}, false, false},
		{"blank is unset", map[string]string{envEmergencyFallback: "  "}, false, false},
		{"garbage keeps default", map[string]string{envEmergencyFallback: "maybe"}, false, true},
		{"disabled is not a switch word", map[string]string{envEmergencyFallback: "disabled"}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := FromEnv(env(tt.env))
			if s.EmergencyDisabled != tt.disabled || (err != nil) != tt.bad {
				t.Fatalf("FromEnv = %+v, %v", s, err)
			}
			var e *Error
			if tt.bad && (!errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrInvalidRule) || !errors.As(err, &e) ||
				e.Field != "OMNIROUTE_EMERGENCY_FALLBACK" || e.Code != "invalid_config" ||
				e.Status != 400 || e.Rule != "" || !strings.Contains(e.Error(), "restate: invalid_config: OMNIROUTE_EMERGENCY_FALLBACK: ")) {
				t.Errorf("error %v (%+v) is not an invalid_config *Error for the variable", err, e)
			}
			// Only the variables that are set are filled in.
			if s != (Config{EmergencyDisabled: tt.disabled}) {
				t.Errorf("FromEnv = %+v, want only EmergencyDisabled set", s)
			}
		})
	}
	if s, err := FromEnv(nil); err != nil || s != (Config{}) {
		t.Errorf("FromEnv(nil) = %+v, %v", s, err)
	}
	c := New(Config{EmergencyDisabled: true})
	if _, ok := c.EmergencyFallback(402, nil, false); ok {
		t.Error("disabled emergency fallback triggered")
	}
}
