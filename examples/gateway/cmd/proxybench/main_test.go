package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// One short round of every path and mode: the rig serves real answers on
// each path (a failed request fails the run) and prints both tables.
func TestRunPrintsEveryPath(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var out bytes.Buffer
	err := run(&out, options{conns: 2, rounds: 1, duration: 50 * time.Millisecond, modes: []string{"json", "stream"}, events: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"\njson\n", "\nstream\n", "direct", "proxy", "gateway", "× the proxy's rps", "× the proxy's CPU per request"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestRunRefusesUnknownNames(t *testing.T) {
	for _, o := range []options{
		{conns: 1, rounds: 1, duration: time.Millisecond, modes: []string{"xml"}},
		{conns: 1, rounds: 1, duration: time.Millisecond, modes: []string{"json"}, paths: []string{"nginx"}},
	} {
		if err := run(&bytes.Buffer{}, o); err == nil {
			t.Errorf("run(%v) succeeded", o)
		}
	}
}

func TestMedianAndRank(t *testing.T) {
	rs := []result{{rps: 3}, {rps: 1}, {rps: 2}, {rps: 10}}
	if got := median(rs, func(r result) float64 { return r.rps }); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	if rank(ds, 50) != 50 || rank(ds, 99) != 99 || rank(ds, 100) != 100 {
		t.Errorf("rank: %v %v %v", rank(ds, 50), rank(ds, 99), rank(ds, 100))
	}
}
