// Package config holds the setting machinery every routeguard layer shares:
// clamps, the one vocabulary for environment values, and a reader that
// collects every bad environment value into one error.
//
// The conventions it serves, the same in every layer:
//
//   - A layer has one flat Config. Its zero value means the documented
//     defaults. A setting where the contract allows 0 as a real value is a
//     pointer: nil means the default, a set pointer is the value, clamped
//     into its range (callers write new(time.Duration(0)) or new(0)).
//   - Config.Normalize returns a clamped copy and never mutates its receiver.
//   - FromEnv(lookup) reads the seed's environment names, and only when the
//     caller asks; blank or missing variables leave the default.
//
// Environment values: a switch is on for 1, true, yes or on and off for 0,
// false, no or off (trimmed, any case), and anything else is an error; a
// number is a finite decimal; a duration is a whole number of milliseconds.
package config

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// Dur returns def when v ≤ 0, else v clamped into [lo, hi].
func Dur(v, def, lo, hi time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return min(max(v, lo), hi)
}

// Int returns def when v ≤ 0, else v clamped into [lo, hi].
func Int(v, def, lo, hi int) int {
	if v <= 0 {
		return def
	}
	return min(max(v, lo), hi)
}

// Float returns def when v ≤ 0 or NaN, else v clamped into [lo, hi].
func Float(v, def, lo, hi float64) float64 {
	if !(v > 0) {
		return def
	}
	return min(max(v, lo), hi)
}

// DurOpt returns def when p is nil, else *p clamped into [lo, hi].
func DurOpt(p *time.Duration, def, lo, hi time.Duration) time.Duration {
	if p == nil {
		return def
	}
	return min(max(*p, lo), hi)
}

// IntOpt returns def when p is nil, else *p clamped into [lo, hi].
func IntOpt(p *int, def, lo, hi int) int {
	if p == nil {
		return def
	}
	return min(max(*p, lo), hi)
}

// ClampDurPtr returns a new pointer to *p clamped into [lo, hi], or nil when p
// is nil. Normalize uses it so the copy it returns shares no pointer with its
// receiver.
func ClampDurPtr(p *time.Duration, lo, hi time.Duration) *time.Duration {
	if p == nil {
		return nil
	}
	v := min(max(*p, lo), hi)
	return &v
}

// ClampIntPtr is [ClampDurPtr] for ints.
func ClampIntPtr(p *int, lo, hi int) *int {
	if p == nil {
		return nil
	}
	v := min(max(*p, lo), hi)
	return &v
}

// Reasons a value is refused; they end up in the layer's error text.
var (
	errSwitch   = errors.New("not a switch (want 1, true, yes, on, 0, false, no or off)")
	errNumber   = errors.New("not a number")
	errFinite   = errors.New("not finite")
	errNegative = errors.New("negative")
	errWhole    = errors.New("not a whole number")
)

// ParseSwitch parses a switch value: 1, true, yes, on → true; 0, false, no,
// off → false (trimmed, any case). Anything else is an error.
func ParseSwitch(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, errSwitch
}

// ParseNumber parses a finite decimal number ≥ 0.
func ParseNumber(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	switch {
	case err != nil:
		return 0, errNumber
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, errFinite
	case f < 0:
		return 0, errNegative
	}
	return f, nil
}

// maxMillis bounds every parsed duration: no setting is longer than a
// century, and the bound keeps the conversion from overflowing.
const maxMillis = 100 * 365 * 24 * 3600 * 1000

// ParseMillis parses a whole number of milliseconds ≥ 0 as a duration.
// Values past a century are held at a century.
func ParseMillis(v string) (time.Duration, error) {
	f, err := ParseNumber(v)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) {
		return 0, errWhole
	}
	return time.Duration(min(f, maxMillis)) * time.Millisecond, nil
}

// ParseInt parses a whole number ≥ 0. Values past 1e9 are held at 1e9.
func ParseInt(v string) (int, error) {
	f, err := ParseNumber(v)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) {
		return 0, errWhole
	}
	return int(min(f, 1e9)), nil
}

// Env reads environment values through Lookup and keeps every refusal.
// Missing and blank variables are left alone. The zero value is not usable:
// Lookup and Refuse must be set.
type Env struct {
	// Lookup is os.LookupEnv or a stand-in.
	Lookup func(string) (string, bool)
	// Refuse turns a bad value into the layer's own error.
	Refuse func(name, value string, reason error) error

	errs []error
}

func (e *Env) get(name string) (string, bool) {
	v, ok := e.Lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return v, true
}

func (e *Env) refuse(name, v string, err error) {
	e.errs = append(e.errs, e.Refuse(name, v, err))
}

// Switch sets *dst from a switch value.
func (e *Env) Switch(name string, dst *bool) {
	if v, ok := e.get(name); ok {
		b, err := ParseSwitch(v)
		if err != nil {
			e.refuse(name, v, err)
			return
		}
		*dst = b
	}
}

// SwitchOpt sets *dst to a pointer to a switch value.
func (e *Env) SwitchOpt(name string, dst **bool) {
	var b bool
	if v, ok := e.get(name); ok {
		var err error
		if b, err = ParseSwitch(v); err != nil {
			e.refuse(name, v, err)
			return
		}
		*dst = &b
	}
}

// Millis sets *dst from a whole number of milliseconds.
func (e *Env) Millis(name string, dst *time.Duration) {
	if v, ok := e.get(name); ok {
		d, err := ParseMillis(v)
		if err != nil {
			e.refuse(name, v, err)
			return
		}
		*dst = d
	}
}

// MillisOpt sets *dst to a pointer to a whole number of milliseconds, so an
// explicit 0 stays 0.
func (e *Env) MillisOpt(name string, dst **time.Duration) {
	if v, ok := e.get(name); ok {
		d, err := ParseMillis(v)
		if err != nil {
			e.refuse(name, v, err)
			return
		}
		*dst = &d
	}
}

// Int sets *dst from a whole number.
func (e *Env) Int(name string, dst *int) {
	if v, ok := e.get(name); ok {
		n, err := ParseInt(v)
		if err != nil {
			e.refuse(name, v, err)
			return
		}
		*dst = n
	}
}

// IntOpt sets *dst to a pointer to a whole number, so an explicit 0 stays 0.
func (e *Env) IntOpt(name string, dst **int) {
	if v, ok := e.get(name); ok {
		n, err := ParseInt(v)
		if err != nil {
			e.refuse(name, v, err)
			return
		}
		*dst = &n
	}
}

// Float sets *dst from a decimal number.
func (e *Env) Float(name string, dst *float64) {
	if v, ok := e.get(name); ok {
		f, err := ParseNumber(v)
		if err != nil {
			e.refuse(name, v, err)
			return
		}
		*dst = f
	}
}

// List sets *dst from a comma-separated list, trimmed, blanks dropped.
func (e *Env) List(name string, dst *[]string) {
	if v, ok := e.get(name); ok {
		var out []string
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		*dst = out
	}
}

// Raw returns a variable's trimmed value for a layer's own reading, and
// whether it was set and not blank.
func (e *Env) Raw(name string) (string, bool) {
	v, ok := e.get(name)
	return strings.TrimSpace(v), ok
}

// Refused records a refusal found by a layer's own reading of [Env.Raw].
func (e *Env) Refused(name, value string, reason error) { e.refuse(name, value, reason) }

// Err joins every refusal, or returns nil.
func (e *Env) Err() error { return errors.Join(e.errs...) }
