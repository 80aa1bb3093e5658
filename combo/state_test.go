package combo

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// A request's state goes back to the pool with nothing of the request left
// in it but the capacity of its scratch slices, whatever way the request
// took (an exclusion, a failed attempt, a fallback, a success).
func TestPutStateLeavesNothingOfTheRequest(t *testing.T) {
	r, c := benchRouter(t, strategyPriority)
	c.Settings.MaxAttempts = 5
	calls := 0
	send := func(ctx context.Context, _ *Target) (*http.Response, error) {
		calls++
		status := http.StatusOK
		if calls == 1 {
			status = http.StatusServiceUnavailable
		}
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
	}
	req := Request{Combo: c, Session: "s1", Tools: 2}
	st := r.getState(context.Background(), &req, c.Settings.norm(), priorityOrder{}, send)
	st.ans = new(answer)
	st.res = &st.ans.res
	st.deadline = time.Now().Add(time.Minute)
	for i := range c.Targets {
		st.all = append(st.all, &c.Targets[i])
	}
	r.screen(st, time.Now())
	r.order(st, time.Now())
	if done, err := r.round(context.Background(), st, time.Now()); !done || err != nil {
		t.Fatalf("round: done %v, err %v", done, err)
	}
	st.res.Response.Body.Close()
	if st.attempted != 2 || len(st.tried) != 2 || len(st.excluded) != 2 || len(st.exh.connections) != 1 {
		t.Fatalf("the request left attempted %d, tried %d, excluded %d, exhausted %d; want 2, 2, 2, 1",
			st.attempted, len(st.tried), len(st.excluded), len(st.exh.connections))
	}
	r.putState(st)
	// The spare timer stays, stopped and tied to no attempt.
	if st.timer == nil || st.timer.cur.Load() != nil {
		t.Fatalf("the spare timer is %+v, want a stopped one tied to no attempt", st.timer)
	}
	want := reqState{set: st.set, all: st.all, eligible: st.eligible, excluded: st.excluded,
		skipped: st.skipped, tried: st.tried, exh: st.exh, timer: st.timer}
	if !reflect.DeepEqual(*st, want) {
		t.Fatalf("putState left %+v", st.reqCore)
	}
	for _, s := range [][]*Target{st.all[:cap(st.all)], st.eligible[:cap(st.eligible)]} {
		for i, p := range s {
			if p != nil {
				t.Fatalf("a pooled slice still points to target %d", i)
			}
		}
	}
	if len(st.all)+len(st.eligible)+len(st.excluded)+len(st.skipped)+len(st.tried) != 0 ||
		len(st.exh.connections)+len(st.exh.providers)+len(st.exh.transient) != 0 {
		t.Fatal("putState left entries in the scratch slices")
	}
}

// reversed orders the targets last first.
type reversed struct{}

func (reversed) Order(p *Pick) { slices.Reverse(p.Targets) }

// A strategy registered under "priority" replaces the default: a combo that
// names no strategy, or names priority, is ordered by it.
func TestReplacedPriorityIsTheDefault(t *testing.T) {
	r := New(Config{Strategies: map[string]Strategy{strategyPriority: reversed{}}})
	for _, name := range []string{"", strategyPriority} {
		c := &Combo{Name: "c", Strategy: name, Targets: []Target{
			{Provider: "a", Connection: "k1", Model: "m"},
			{Provider: "b", Connection: "k2", Model: "m"},
		}}
		res, err := r.Do(context.Background(), Request{Combo: c}, func(context.Context, *Target) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		res.Response.Body.Close()
		if res.Target.Provider != "b" {
			t.Fatalf("strategy %q: served by %s, want b (the replacement's first)", name, res.Target.Provider)
		}
	}
}
