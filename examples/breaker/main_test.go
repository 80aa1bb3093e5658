package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// inProcess is a transport that hands each request straight to a handler,
// so the demo runs inside a synctest bubble without a socket.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// story is the demo's output.
const story = `call  1  closed    admitted, upstream 503 (failure)
call  2  closed    admitted, upstream 503 (failure)
         closed → degraded
call  3  degraded  admitted, upstream 503 (failure)
call  4  degraded  admitted, upstream 503 (failure)
         degraded → open
call  5  open      refused, Retry-After: 1
call  6  half-open admitted, upstream 503 (failure)
         open → half-open
         half-open → open
call  7  open      refused, Retry-After: 1
call  8  half-open admitted, upstream 200 (success)
         open → half-open
         half-open → closed
call  9  closed    admitted, upstream 200 (success)
call 10  closed    admitted, upstream 200 (success)
call 11  closed    admitted, upstream 200 (success)
call 12  closed    admitted, upstream 200 (success)
direct failure on key-1 counted: true
direct failure on key-1 counted: false
direct failure on key-2 counted: true
         closed → degraded
restored after a restart: degraded with 2 failures
`

// The whole story, with fake time: every line and state change in order.
func TestDemoStory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		client := &http.Client{Transport: inProcess{flaky()}}
		require.NoError(t, demo(&out, client, "http://upstream.test/"))
		assert.Equal(t, story, out.String())
	})
}

// The command itself, against a real loopback server and the wall clock
// (about two seconds: the breaker stays open for one second, twice).
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo in real time (about 2 s)")
	}
	var out bytes.Buffer
	require.NoError(t, run(&out))
	assert.Equal(t, story, out.String())
}
