package watchdog_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/routeguard/routeguard/watchdog"
)

// An Observer judges a stream from explicit times: here the upstream sends
// one word and then only heartbeats. After one full window (no warm-up) the
// window holds 2 useful bytes over 10 s, below 1 B/s.
func ExampleObserver() {
	o := watchdog.NewObserver(watchdog.Config{Throughput: true, Warmup: new(time.Duration(0)), Window: 10 * time.Second, MinBytesPerSecond: 1})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	word := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n")
	ping := []byte(": ping\n\n")

	fmt.Println(o.ObserveAt(word, start))
	for s := 5; s <= 25; s += 5 {
		if err := o.ObserveAt(ping, start.Add(time.Duration(s)*time.Second)); err != nil {
			var e *watchdog.Error
			errors.As(err, &e)
			fmt.Println(s, e.Code, e.Reason)
			break
		}
		fmt.Println(s, "ok")
	}
	// Output:
	// <nil>
	// 5 ok
	// 10 STREAM_THROUGHPUT_TOO_LOW throughput_too_low
}

// Wrap guards an upstream body; the reader gets exactly the upstream bytes
// and Finalize runs once.
func ExampleWrap() {
	upstream := io.NopCloser(strings.NewReader(
		"data: {\"type\":\"response.output_text.delta\",\"delta\":\"hello\"}\n\n"))
	body := watchdog.Wrap(upstream, watchdog.Config{
		Throughput:      true,
		IdleTimeout:     2 * time.Minute,
		AttemptDeadline: 5 * time.Minute,
	}, watchdog.Options{
		Finalize: func(o watchdog.Outcome) {
			fmt.Println("finalized: eof", o.EOF, "delivered", o.Delivered, "useful", o.Stats.UsefulBytes)
		},
	})
	defer body.Close()
	data, err := io.ReadAll(body)
	fmt.Println(len(data), err, body.Committed())
	// Output:
	// finalized: eof true delivered 61 useful 5
	// 61 <nil> true
}

// FindErrorEvent pulls an error out of a stream whose status was 200 so it
// can be classified like an HTTP error.
func ExampleFindErrorEvent() {
	stream := "event: error\n" +
		"data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	ev, ok := watchdog.FindErrorEvent([]byte(stream))
	fmt.Println(ok, ev.Event, ev.Type, ev.Message)
	// Output:
	// true error overloaded_error Overloaded
}

// FromEnv reads the settings through a lookup function and fills only the
// fields whose variables are set; Normalize shows the values in force.
func ExampleFromEnv() {
	env := map[string]string{
		"STREAM_THROUGHPUT_WATCHDOG_ENABLED": "true",
		"STREAM_IDLE_TIMEOUT_MS":             "125000",
	}
	cfg, err := watchdog.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fmt.Println(cfg.Throughput, cfg.Window, cfg.IdleTimeout, cfg.AttemptDeadline, err)
	n := cfg.Normalize()
	fmt.Println(*n.Warmup, n.Window, *n.ReadinessTimeout)
	// Output:
	// true 0s 2m5s 0s <nil>
	// 30s 30s 2m0s
}

// The readiness timeout (on by default, 120 s; 5 s here) aborts an attempt
// that has sent nothing but heartbeats since it started.
func ExampleObserver_readiness() {
	o := watchdog.NewObserver(watchdog.Config{ReadinessTimeout: new(5 * time.Second)})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o.StartAt(start)
	fmt.Println(o.ObserveAt([]byte(": keep-alive\n\n"), start.Add(2*time.Second)))
	fmt.Println(o.CheckAt(start.Add(4999 * time.Millisecond)))
	var e *watchdog.Error
	if errors.As(o.CheckAt(start.Add(5*time.Second)), &e) {
		fmt.Println(e.Code, e.Status, e.Reason)
	}
	// Output:
	// <nil>
	// <nil>
	// STREAM_READINESS_TIMEOUT 504 readiness_timeout
}
