// Command breaker drives a provider circuit breaker against a flaky
// in-process upstream and prints what happens to each call.
//
// The upstream answers 503 to its first five requests and 200 afterwards.
// The breaker opens after four counted failures, so the run shows
// closed → degraded → open → half-open (a failed probe) → open →
// half-open (a good probe) → closed. Then it records failures directly (one
// connection's repeats count once) and saves and restores the breaker's
// state as JSON. It needs no network beyond loopback and finishes in about
// two seconds.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/routeguard/routeguard/breaker"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "breaker demo:", err)
		os.Exit(1)
	}
}

// run starts the flaky upstream on loopback and runs the demo against it,
// writing the story to w.
func run(w io.Writer) error {
	upstream := httptest.NewServer(flaky())
	defer upstream.Close()
	return demo(w, upstream.Client(), upstream.URL)
}

// flaky returns an upstream that answers 503 to its first five requests and
// 200 afterwards.
func flaky() http.Handler {
	var hits atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1) <= 5 {
			http.Error(w, "upstream is down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// profiles are the demo's breaker profiles: degraded at 2, open at 4, one
// second open (the shortest allowed).
var profiles = map[string]breaker.Profile{
	"flaky": {DegradedAt: 2, OpenAt: 4, Reset: time.Second},
}

// demo sends twelve calls through a breaker to the upstream at url, then
// records failures directly and saves and restores the breaker's state.
func demo(w io.Writer, client *http.Client, url string) error {
	var changes []breaker.Event // the loop below is the only caller
	set := breaker.NewSet(breaker.Config{
		Profiles: profiles,
		// The hook runs outside the breaker's locks; keep the changes and
		// print them after the line of the call that caused them.
		OnChange: func(e breaker.Event) { changes = append(changes, e) },
	})

	for call := 1; call <= 12; call++ {
		before, _ := set.StateAt("flaky", time.Now())
		done, err := set.AllowReportAt("flaky", time.Now())
		var be *breaker.Error
		if errors.As(err, &be) {
			fmt.Fprintf(w, "call %2d  %-9v refused, Retry-After: %d\n", call, before, retryAfterSeconds(be.RetryAfter))
			time.Sleep(be.RetryAfter)
			printChanges(w, &changes)
			continue
		}
		status, err := get(client, url)
		outcome := breaker.Classify(status, nil, err)
		done(breaker.Report{Outcome: outcome, At: time.Now()})
		fmt.Fprintf(w, "call %2d  %-9v admitted, upstream %d (%v)\n", call, before, status, outcome)
		printChanges(w, &changes)
		time.Sleep(50 * time.Millisecond)
	}
	if st, _ := set.StateAt("flaky", time.Now()); st != breaker.Closed {
		return fmt.Errorf("ended %v, want closed", st)
	}
	printChanges(w, &changes)

	return reportAndRestore(w, set, &changes)
}

// reportAndRestore records failures on set's closed "flaky" breaker
// directly, then saves its state as JSON and restores it into a new set.
func reportAndRestore(w io.Writer, set *breaker.Set, changes *[]breaker.Event) error {
	// A router may also record failures it learns outside AllowReportAt.
	// Repeats from one connection within 5 s count once.
	for _, conn := range []string{"key-1", "key-1", "key-2"} {
		counted := set.ReportAt("flaky", breaker.Report{Outcome: breaker.Failure, Conn: conn}, time.Now())
		fmt.Fprintf(w, "direct failure on %s counted: %v\n", conn, counted)
	}
	printChanges(w, changes)

	// The breaker's state is plain data: save it anywhere, restore it after
	// a restart.
	saved, err := json.Marshal(set.SnapshotAt(time.Now()))
	if err != nil {
		return err
	}
	var records []breaker.Record
	if err := json.Unmarshal(saved, &records); err != nil {
		return err
	}
	restored := breaker.NewSet(breaker.Config{Profiles: profiles})
	if err := restored.RestoreAt(records, time.Now()); err != nil {
		return err
	}
	st := restored.SnapshotAt(time.Now())[0]
	fmt.Fprintf(w, "restored after a restart: %v with %d failures\n", st.State, st.Failures)
	if st.State != breaker.Degraded || st.Failures != 2 {
		return fmt.Errorf("restored %v with %d failures, want degraded with 2", st.State, st.Failures)
	}
	return nil
}

func get(client *http.Client, url string) (int, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// retryAfterSeconds is the Retry-After a gateway would send for a wait:
// whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

func printChanges(w io.Writer, changes *[]breaker.Event) {
	for _, c := range *changes {
		fmt.Fprintf(w, "         %v → %v\n", c.From, c.To)
	}
	*changes = (*changes)[:0]
}
