package combo

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestAttemptContextOfARequestThatCannotEnd checks the attempt's own
// context, used when the request's context can never end: it carries the
// request's values, is live during the send, ends when the answer's body is
// closed, and contexts derived from it end with it without a goroutine of
// their own.
func TestAttemptContextOfARequestThatCannotEnd(t *testing.T) {
	type key struct{}
	r, c := benchRouter(t, strategyPriority)
	var (
		actx            context.Context
		child           context.Context
		stopChild       context.CancelFunc
		afterRan        = make(chan struct{})
		goroutinesAdded int
	)
	send := func(ctx context.Context, _ *Target) (*http.Response, error) {
		actx = ctx
		if ctx.Err() != nil {
			t.Errorf("Err during the send = %v, want nil", ctx.Err())
		}
		select {
		case <-ctx.Done():
			t.Error("Done is closed during the send")
		default:
		}
		before := runtime.NumGoroutine()
		child, stopChild = context.WithCancel(ctx)
		context.AfterFunc(ctx, func() { close(afterRan) })
		goroutinesAdded = runtime.NumGoroutine() - before
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
	}
	ctx := context.WithValue(context.WithoutCancel(context.Background()), key{}, "v")
	res, err := r.Do(ctx, Request{Combo: c}, send)
	if err != nil {
		t.Fatal(err)
	}
	defer stopChild()
	if _, ok := actx.(*attemptCtx); !ok {
		t.Fatalf("the attempt's context is a %T, want *attemptCtx", actx)
	}
	if got := actx.Value(key{}); got != "v" {
		t.Fatalf("Value = %v, want the request's value", got)
	}
	if _, ok := actx.Deadline(); ok {
		t.Fatal("the attempt's context has a deadline its request's has not")
	}
	if goroutinesAdded != 0 {
		t.Fatalf("deriving from the attempt's context started %d goroutines, want 0", goroutinesAdded)
	}
	if child.Err() != nil || actx.Err() != nil {
		t.Fatal("the attempt's context ended before the body was closed")
	}
	if _, err := io.Copy(io.Discard, res.Response.Body); err != nil {
		t.Fatal(err)
	}
	res.Response.Body.Close()
	if !errors.Is(actx.Err(), context.Canceled) {
		t.Fatalf("Err after Close = %v, want context.Canceled", actx.Err())
	}
	<-actx.Done()
	<-child.Done()
	if !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("the derived context's Err = %v, want context.Canceled", child.Err())
	}
	<-afterRan
}

// TestAttemptContextCutByItsTimeout runs a send that waits on its context
// past the per-target timeout: the attempt's own context ends at exactly
// the timeout, a context derived from it too, and the next target answers.
func TestAttemptContextCutByItsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, c := benchRouter(t, strategyPriority)
		c.Settings.TargetTimeout = 3 * time.Second
		calls := 0
		send := func(ctx context.Context, _ *Target) (*http.Response, error) {
			calls++
			if calls == 1 {
				child, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				<-child.Done()
				return nil, ctx.Err()
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: staticBody{strings.NewReader("ok")}}, nil
		}
		start := time.Now()
		res, err := r.Do(context.Background(), Request{Combo: c}, send)
		if err != nil {
			t.Fatal(err)
		}
		res.Response.Body.Close()
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("answered after %v, want 3s", d)
		}
		if n := len(res.Attempts); n != 2 || res.Attempts[0].Status != http.StatusGatewayTimeout {
			t.Fatalf("attempts = %+v, want a 504 then a success", res.Attempts)
		}
	})
}

// TestAttemptContextAfterFunc checks the registration that derived
// contexts use: a stopped function never runs, one registered after the
// end runs anyway, and ending twice runs nothing twice.
func TestAttemptContextAfterFunc(t *testing.T) {
	c := &attemptCtx{Context: context.Background()}
	ran := 0
	stop := c.AfterFunc(func() { ran += 10 })
	c.AfterFunc(func() { ran++ })
	if !stop() {
		t.Fatal("stop before the end = false, want true")
	}
	if stop() {
		t.Fatal("a second stop = true, want false")
	}
	c.cancel()
	c.cancel()
	if ran != 1 {
		t.Fatalf("ran = %d, want 1 (the stopped function must not run)", ran)
	}
	late := make(chan struct{})
	if c.AfterFunc(func() { close(late) })() {
		t.Fatal("stop of a function registered after the end = true, want false")
	}
	<-late
	select {
	case <-c.Done():
	default:
		t.Fatal("Done made after the end is not closed")
	}
}

// TestAttemptContextOfARequestThatCanEnd checks that a request whose
// context can end gets a context that ends with it at once.
func TestAttemptContextOfARequestThatCanEnd(t *testing.T) {
	r, c := benchRouter(t, strategyPriority)
	c.Settings.MaxAttempts = 1
	ctx, cancel := context.WithCancel(context.Background())
	send := func(actx context.Context, _ *Target) (*http.Response, error) {
		if _, ok := actx.(*attemptCtx); ok {
			t.Error("a request that can end got the attempt's own context")
		}
		cancel()
		select {
		case <-actx.Done():
		default:
			t.Error("the attempt's context did not end with its request's")
		}
		return nil, actx.Err()
	}
	if _, err := r.Do(ctx, Request{Combo: c}, send); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
}
