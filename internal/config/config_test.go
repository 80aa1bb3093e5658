package config_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/routeguard/routeguard/internal/config"
)

func TestClamps(t *testing.T) {
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"Dur zero is default", config.Dur(0, 5, 1, 10), time.Duration(5)},
		{"Dur negative is default", config.Dur(-1, 5, 1, 10), time.Duration(5)},
		{"Dur below range", config.Dur(1, 5, 2, 10), time.Duration(2)},
		{"Dur above range", config.Dur(11, 5, 2, 10), time.Duration(10)},
		{"Int zero is default", config.Int(0, 7, 1, 10), 7},
		{"Int in range", config.Int(3, 7, 1, 10), 3},
		{"Float NaN is default", config.Float(nanF(), 2, 1, 10), 2.0},
		{"Float above range", config.Float(20, 2, 1, 10), 10.0},
		{"DurOpt nil is default", config.DurOpt(nil, 5, 0, 10), time.Duration(5)},
		{"DurOpt zero is zero", config.DurOpt(new(time.Duration(0)), 5, 0, 10), time.Duration(0)},
		{"DurOpt negative clamps to low", config.DurOpt(new(time.Duration(-1)), 5, 0, 10), time.Duration(0)},
		{"IntOpt zero is zero", config.IntOpt(new(0), 5, 0, 10), 0},
		{"IntOpt above range", config.IntOpt(new(99), 5, 0, 10), 10},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func nanF() float64 { var z float64; return z / z }

func TestClampPtrCopies(t *testing.T) {
	p := new(time.Duration(20))
	q := config.ClampDurPtr(p, 0, 10)
	if q == p || *q != 10 || *p != 20 {
		t.Fatalf("ClampDurPtr = %v (same pointer %v), source now %v", *q, q == p, *p)
	}
	if config.ClampDurPtr(nil, 0, 1) != nil || config.ClampIntPtr(nil, 0, 1) != nil {
		t.Fatal("nil must stay nil")
	}
}

func TestParseSwitch(t *testing.T) {
	for _, v := range []string{"1", "true", "YES", " on "} {
		if b, err := config.ParseSwitch(v); err != nil || !b {
			t.Errorf("ParseSwitch(%q) = %v, %v; want true", v, b, err)
		}
	}
	for _, v := range []string{"0", "False", "no", "OFF"} {
		if b, err := config.ParseSwitch(v); err != nil || b {
			t.Errorf("ParseSwitch(%q) = %v, %v; want false", v, b, err)
		}
	}
	for _, v := range []string{"", "2", "enabled", "nope"} {
		if _, err := config.ParseSwitch(v); err == nil {
			t.Errorf("ParseSwitch(%q) accepted", v)
		}
	}
}

func TestParseMillis(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{" 1500 ", 1500 * time.Millisecond, true},
		{"1e3", time.Second, true},
		{"1.5", 0, false},
		{"-1", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"abc", 0, false},
		{"1e300", 100 * 365 * 24 * time.Hour, true},
	}
	for _, tt := range tests {
		got, err := config.ParseMillis(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseMillis(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestEnvCollectsEveryRefusal(t *testing.T) {
	vars := map[string]string{"ON": "yes", "MS": "0", "BAD": "x", "BAD2": "-3", "N": "4", "L": " a, ,b ", "BLANK": "  "}
	e := config.Env{
		Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Refuse: func(name, value string, reason error) error { return fmt.Errorf("%s=%q: %w", name, value, reason) },
	}
	var on bool
	var ms *time.Duration
	var bad time.Duration
	var bad2, n int
	var blank = 9
	var l []string
	e.Switch("ON", &on)
	e.MillisOpt("MS", &ms)
	e.Millis("BAD", &bad)
	e.Int("BAD2", &bad2)
	e.Int("N", &n)
	e.Int("BLANK", &blank)
	e.List("L", &l)
	if !on || ms == nil || *ms != 0 || n != 4 || blank != 9 || len(l) != 2 || l[0] != "a" || l[1] != "b" {
		t.Fatalf("on=%v ms=%v n=%d blank=%d l=%q", on, ms, n, blank, l)
	}
	err := e.Err()
	if err == nil || err.Error() != "BAD=\"x\": not a number\nBAD2=\"-3\": negative" {
		t.Fatalf("Err() = %v", err)
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 2 {
		t.Fatalf("want two joined errors, got %v", err)
	}
}
