package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/routeguard/routeguard/combo"
)

// options shape one demo run.
type options struct {
	perPhase      int           // requests in each phase
	phase         time.Duration // how long each phase lasts
	clientTimeout time.Duration // how long the client waits for an answer
}

var defaultOptions = options{perPhase: 10, phase: 800 * time.Millisecond, clientTimeout: 2 * time.Second}

// request is one request of the stream.
type request struct {
	n      int // from 1
	phase  int
	stream bool // every fifth request is streamed
}

func (r request) combo() *combo.Combo {
	if r.stream {
		return streaming
	}
	return chat
}

func requests(perPhase int) []request {
	var rs []request
	for phase := range numPhases {
		for range perPhase {
			n := len(rs) + 1
			rs = append(rs, request{n: n, phase: phase, stream: n%5 == 0})
		}
	}
	return rs
}

// tally is the score of one run.
type tally struct {
	requests, succeeded, calls int
	latencies                  []time.Duration
}

func (t *tally) add(ok bool, d time.Duration) {
	t.requests++
	if ok {
		t.succeeded++
	}
	t.latencies = append(t.latencies, d)
}

// wasted counts the upstream calls that did not give the client its answer.
func (t *tally) wasted() int { return t.calls - t.succeeded }

// percentile returns the p-th percentile latency (nearest rank).
func (t *tally) percentile(p int) time.Duration {
	if len(t.latencies) == 0 {
		return 0
	}
	s := slices.Clone(t.latencies)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}

// answered reads a response to the end and reports whether it carried text.
func answered(resp *http.Response) bool { return answer(resp) == nil }

// answer reads resp and says why it is not an answer with text, if it is
// not.
func answer(resp *http.Response) error {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return fmt.Errorf("reading the answer: %w", err)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %d", resp.StatusCode)
	case !bytes.Contains(body, []byte(`"content":"`)):
		return errors.New("no text in the answer")
	}
	return nil
}

// play sends the request stream through do, one request at a time, on a
// fixed schedule: request i starts i·opt.phase/opt.perPhase after the run
// began, or as soon as the one before it is done if that one ran late. The
// world follows the phases of the requests.
func play(w *world, opt options, do func(ctx context.Context, r request) bool, phaseDone func(phase, answered int)) tally {
	var score tally
	spacing := opt.phase / time.Duration(opt.perPhase)
	start := time.Now()
	answered := 0
	for i, r := range requests(opt.perPhase) {
		time.Sleep(time.Until(start.Add(time.Duration(i) * spacing)))
		w.phase.Store(int32(r.phase))
		ctx, cancel := context.WithTimeout(context.Background(), opt.clientTimeout)
		began := time.Now()
		ok := do(ctx, r)
		cancel()
		score.add(ok, time.Since(began))
		if ok {
			answered++
		}
		if r.n%opt.perPhase == 0 {
			phaseDone(r.phase, answered)
			answered = 0
		}
	}
	score.calls = w.calls()
	return score
}

// runDirect sends every request straight to the first target of its combo,
// with nothing in between.
func runDirect(out io.Writer, opt options) tally {
	w := newWorld()
	defer w.close()
	fmt.Fprintln(out, "direct: each request goes straight to the first target of its combo")
	start := time.Now()
	direct := func(ctx context.Context, r request) bool {
		resp, err := w.send(ctx, &r.combo().Targets[0], r.stream)
		return err == nil && answered(resp)
	}
	return play(w, opt, direct, func(phase, answered int) {
		fmt.Fprintf(out, "  %s  phase %d  %-54s %2d/%d answered\n", since(start), phase+1,
			phaseTitles[phase], answered, opt.perPhase)
	})
}

// runRouted sends the same requests through a routeguard router and prints
// the timeline of what its layers did.
func runRouted(out io.Writer, opt options) tally {
	w := newWorld()
	defer w.close()
	tl := newTimeline(out)
	router := newRouter(tl)
	fmt.Fprintln(out, "routeguard: the same requests through combo.Router with every layer on")
	for _, c := range []*combo.Combo{chat, streaming} {
		names := make([]string, len(c.Targets))
		for i := range c.Targets {
			names[i] = c.Targets[i].String()
		}
		fmt.Fprintf(out, "  combo %-6s = %s\n", c.Name, strings.Join(names, ", "))
	}
	routed := func(ctx context.Context, r request) bool {
		if (r.n-1)%opt.perPhase == 0 {
			tl.phase(r.phase)
		}
		tl.begin(r)
		send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
			resp, err := w.send(ctx, t, r.stream)
			if err == nil {
				tl.upstreamStatus(resp.StatusCode)
			}
			return resp, err
		}
		// One agent session: affinity pins it to the key that served it.
		res, err := router.Do(ctx, combo.Request{Combo: r.combo(), Session: "agent-7"}, send)
		if err == nil {
			err = answer(res.Response)
		}
		ok := err == nil
		tl.end(ok, err)
		return ok
	}
	return play(w, opt, routed, func(phase, answered int) {
		tl.printf("phase %d: %d/%d answered", phase+1, answered, opt.perPhase)
	})
}

// since formats the time since start as 1.23s.
func since(start time.Time) string {
	return fmt.Sprintf("%5.2fs", time.Since(start).Seconds())
}

// printTable prints the two runs side by side.
func printTable(out io.Writer, direct, routed tally) {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	rows := [][3]string{
		{"requests", fmt.Sprint(direct.requests), fmt.Sprint(routed.requests)},
		{"succeeded", fmt.Sprint(direct.succeeded), fmt.Sprint(routed.succeeded)},
		{"failed", fmt.Sprint(direct.requests - direct.succeeded), fmt.Sprint(routed.requests - routed.succeeded)},
		{"upstream calls", fmt.Sprint(direct.calls), fmt.Sprint(routed.calls)},
		{"upstream calls wasted", fmt.Sprint(direct.wasted()), fmt.Sprint(routed.wasted())},
		{"p50 latency", ms(direct.percentile(50)), ms(routed.percentile(50))},
		{"p99 latency", ms(direct.percentile(99)), ms(routed.percentile(99))},
	}
	fmt.Fprintf(out, "%-22s %10s %12s\n", "", "direct", "routeguard")
	for _, r := range rows {
		fmt.Fprintf(out, "%-22s %10s %12s\n", r[0], r[1], r[2])
	}
}
