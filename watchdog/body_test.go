package watchdog

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// script writes chunks to a pipe at the given offsets from the start, then
// closes it (with closeErr, or EOF when nil). It runs inside a bubble.
type chunkAt struct {
	after time.Duration
	data  string
}

func script(t *testing.T, chunks []chunkAt, closeErr error) *io.PipeReader {
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		start := time.Now()
		for _, c := range chunks {
			select {
			case <-time.After(time.Until(start.Add(c.after))):
			case <-stop:
				pw.Close()
				return
			}
			if _, err := pw.Write([]byte(c.data)); err != nil {
				return
			}
		}
		pw.CloseWithError(closeErr)
	}()
	return pr
}

// closeCounter records Close calls on a reader.
type closeCounter struct {
	io.Reader
	closes atomic.Int32
}

func (c *closeCounter) Close() error { c.closes.Add(1); return nil }

type record struct {
	finals   atomic.Int32
	aborts   atomic.Int32
	cancels  atomic.Int32
	outcome  atomic.Pointer[Outcome]
	abortErr atomic.Pointer[error]
}

func (r *record) options(withCancel bool, cancel func()) Options {
	o := Options{
		OnAbort: func(err error) { r.aborts.Add(1); r.abortErr.Store(&err) },
		Finalize: func(out Outcome) {
			r.finals.Add(1)
			r.outcome.Store(&out)
		},
	}
	if withCancel {
		o.Cancel = func() {
			r.cancels.Add(1)
			if cancel != nil {
				cancel()
			}
		}
	}
	return o
}

func TestBodyPassesBytesThrough(t *testing.T) {
	stream := chat("hello") + ping + chat("wörld") + chatDoneEvt
	up := &closeCounter{Reader: strings.NewReader(stream)}
	var r record
	b := Wrap(up, Config{Throughput: true}, r.options(false, nil))
	got, err := io.ReadAll(b)
	require.NoError(t, err)
	assert.Equal(t, stream, string(got))
	assert.True(t, b.Committed())
	assert.Equal(t, int64(len(stream)), b.Delivered())
	require.Equal(t, int32(1), r.finals.Load())
	out := r.outcome.Load()
	assert.True(t, out.EOF)
	assert.NoError(t, out.Err)
	assert.True(t, out.Committed)
	assert.Equal(t, int64(len(stream)), out.Delivered)
	assert.Equal(t, int64(11), out.Stats.UsefulBytes)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	assert.Equal(t, int32(1), up.closes.Load())
	assert.Equal(t, int32(1), r.finals.Load())
	assert.Equal(t, int32(0), r.aborts.Load())
	_, err = b.Read(make([]byte, 8))
	assert.ErrorIs(t, err, ErrClosed)
}

func TestBodyIdleTimeoutWhileReadBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := script(t, []chunkAt{{0, chat("a")}, {2 * time.Second, ping}, {time.Hour, chat("never")}}, nil)
		var r record
		start := time.Now()
		b := Wrap(up, Config{IdleTimeout: 10 * time.Second}, r.options(false, nil))
		buf := make([]byte, 4096)
		n, err := b.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, chat("a"), string(buf[:n]))
		n, err = b.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, ping, string(buf[:n]))
		_, err = b.Read(buf) // blocks until the idle timer closes the pipe
		var e *Error
		require.True(t, errors.As(err, &e), "got %v", err)
		assert.Equal(t, CodeIdleTimeout, e.Code)
		assert.Equal(t, 12*time.Second, time.Since(start))
		assert.Equal(t, 12*time.Second, e.Elapsed)
		assert.Equal(t, int32(1), r.aborts.Load())
		require.Equal(t, int32(1), r.finals.Load())
		out := r.outcome.Load()
		assert.ErrorIs(t, out.Err, ErrIdleTimeout)
		assert.True(t, out.Committed)
		assert.False(t, out.EOF)
		assert.ErrorIs(t, b.Err(), ErrIdleTimeout)
		_, err = b.Read(buf)
		assert.ErrorIs(t, err, ErrIdleTimeout)
		require.NoError(t, b.Close())
		assert.Equal(t, int32(1), r.finals.Load())
	})
}

func TestBodyIdleTimeoutCallsCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := script(t, []chunkAt{{time.Hour, chat("never")}}, nil)
		var r record
		b := Wrap(up, Config{IdleTimeout: 5 * time.Second}, r.options(true, func() { up.CloseWithError(errors.New("context canceled")) }))
		_, err := b.Read(make([]byte, 64))
		assert.ErrorIs(t, err, ErrIdleTimeout)
		assert.Equal(t, int32(1), r.cancels.Load())
		assert.False(t, b.Committed())
		out := r.outcome.Load()
		require.NotNil(t, out)
		assert.False(t, out.Committed)
		require.NoError(t, b.Close())
	})
}

func TestBodyAttemptDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var chunks []chunkAt
		for i := range 100 {
			chunks = append(chunks, chunkAt{time.Duration(i) * time.Second, chat("steady text")})
		}
		up := script(t, chunks, nil)
		var r record
		start := time.Now()
		b := Wrap(up, Config{AttemptDeadline: 30 * time.Second, IdleTimeout: 5 * time.Second}, r.options(false, nil))
		got, err := io.ReadAll(b)
		assert.ErrorIs(t, err, ErrAttemptDeadline)
		assert.Equal(t, 30*time.Second, time.Since(start))
		// Exactly the first 30 chunks (0 s .. 29 s), unchanged.
		assert.Equal(t, strings.Repeat(chat("steady text"), 30), string(got))
		assert.Equal(t, int32(1), r.finals.Load())
		require.NoError(t, b.Close())
	})
}

func TestBodyThroughputAbortAfterCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chunks := []chunkAt{{0, chat("first")}}
		for i := 1; i <= 10; i++ {
			chunks = append(chunks, chunkAt{time.Duration(i) * time.Second, ping})
		}
		up := script(t, chunks, nil)
		var r record
		b := Wrap(up, enabled(0, 2000, 1, 1), r.options(false, nil))
		got, err := io.ReadAll(b)
		var e *Error
		require.True(t, errors.As(err, &e))
		assert.Equal(t, CodeThroughputTooLow, e.Code)
		// The rule is ready at 2 s; the window [1 s, 3 s] is empty at 3 s.
		assert.Equal(t, chat("first")+ping+ping, string(got))
		assert.Equal(t, 3*time.Second, e.Elapsed)
		assert.True(t, b.Committed())
		assert.Equal(t, int32(1), r.aborts.Load())
		assert.Equal(t, int32(1), r.finals.Load())
		require.NoError(t, b.Close())
	})
}

// recoverable reads one request: when an attempt is aborted before commit it
// reopens once; it finalises the request once.
func recoverable(t *testing.T, open func(attempt int) *Body, finalize func()) (string, int, error) {
	t.Helper()
	defer finalize()
	var out bytes.Buffer
	reopens := 0
	for attempt := 0; ; attempt++ {
		b := open(attempt)
		_, err := io.Copy(&out, b)
		_ = b.Close()
		if err != nil && !b.Committed() && reopens == 0 {
			reopens++
			continue
		}
		return out.String(), reopens, err
	}
}

// Scenario 9: an attempt that only sends pings (at 0, 1 s and 2 s) is
// aborted before commit and the client sees only the recovered stream.
func TestScenarioRecoveryBeforeCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := enabled(0, 1000, 1, 1)
		cfg.HoldHeartbeats = true
		var aborts, requestFinals atomic.Int32
		var outcomes [2]atomic.Pointer[Outcome]
		var abortErr atomic.Pointer[error]
		good := chat("recovered") + chatDoneEvt
		open := func(attempt int) *Body {
			opts := Options{
				OnAbort:  func(err error) { aborts.Add(1); abortErr.Store(&err) },
				Finalize: func(o Outcome) { outcomes[attempt].Store(&o) },
			}
			if attempt == 0 {
				return Wrap(script(t, []chunkAt{{0, ping}, {time.Second, ping}, {2 * time.Second, ping}}, nil), cfg, opts)
			}
			return Wrap(io.NopCloser(strings.NewReader(good)), cfg, opts)
		}
		start := time.Now()
		got, reopens, err := recoverable(t, open, func() { requestFinals.Add(1) })
		require.NoError(t, err)
		assert.Equal(t, good, got, "only the recovered stream reaches the client")
		assert.Equal(t, 1, reopens)
		assert.Equal(t, int32(1), aborts.Load())
		assert.Equal(t, int32(1), requestFinals.Load())
		assert.Equal(t, time.Second, time.Since(start), "aborted at the ping of 1 s")

		var e *Error
		require.True(t, errors.As(*abortErr.Load(), &e))
		assert.Equal(t, CodeThroughputTooLow, e.Code)
		assert.Equal(t, time.Second, e.Elapsed)
		assert.Equal(t, int64(0), e.WindowBytes)

		first, second := outcomes[0].Load(), outcomes[1].Load()
		require.NotNil(t, first)
		require.NotNil(t, second)
		assert.ErrorIs(t, first.Err, ErrThroughputTooLow)
		assert.False(t, first.Committed)
		assert.Equal(t, int64(0), first.Delivered)
		assert.NoError(t, second.Err)
		assert.True(t, second.EOF)
		assert.True(t, second.Committed)
		assert.Equal(t, int64(len(good)), second.Delivered)
	})
}

func TestBodyHoldHeartbeatsReleasesExactBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stream := []chunkAt{{0, comment}, {time.Second, ping}, {2 * time.Second, ping + "data: {\"choices\":[{\"delta\":"}, {3 * time.Second, "{\"content\":\"hi\"}}]}\n\n"}, {4 * time.Second, chat("more")}}
		var want string
		for _, c := range stream {
			want += c.data
		}
		cfg := Config{HoldHeartbeats: true}
		var r record
		b := Wrap(script(t, stream, nil), cfg, r.options(false, nil))
		// A tiny buffer makes the release span several Reads.
		var got bytes.Buffer
		buf := make([]byte, 7)
		var firstAt time.Duration
		start := time.Now()
		for {
			n, err := b.Read(buf)
			if n > 0 && got.Len() == 0 {
				firstAt = time.Since(start)
			}
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
		assert.Equal(t, want, got.String())
		assert.Equal(t, 3*time.Second, firstAt, "nothing before the first real event")
		assert.Equal(t, int32(1), r.finals.Load())
		assert.True(t, r.outcome.Load().EOF)
		require.NoError(t, b.Close())
	})
}

func TestBodyHoldHeartbeatsOnlyPingsThenEOF(t *testing.T) {
	stream := comment + ping + ping
	b := Wrap(io.NopCloser(strings.NewReader(stream)), Config{HoldHeartbeats: true}, Options{})
	got, err := io.ReadAll(b)
	require.NoError(t, err)
	assert.Equal(t, stream, string(got))
	require.NoError(t, b.Close())
}

func TestBodyHoldHeartbeatsUpstreamErrorBeforeCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("connection reset")
		var r record
		b := Wrap(script(t, []chunkAt{{0, ping}, {time.Second, ping}}, boom), Config{HoldHeartbeats: true}, r.options(false, nil))
		got, err := io.ReadAll(b)
		assert.ErrorIs(t, err, boom)
		assert.Empty(t, got)
		assert.False(t, b.Committed())
		out := r.outcome.Load()
		require.NotNil(t, out)
		assert.ErrorIs(t, out.Err, boom)
		assert.False(t, out.Committed)
		require.NoError(t, b.Close())
	})
}

func TestBodyHoldHeartbeatsCapReleases(t *testing.T) {
	cfg := Config{HoldHeartbeats: true, MaxEventBytes: minMaxEventBytes}
	stream := strings.Repeat(comment, 200) // more than 1 KiB of comments
	b := Wrap(io.NopCloser(strings.NewReader(stream)), cfg, Options{})
	buf := make([]byte, 64)
	total := 0
	for b.Delivered() == 0 {
		n, err := b.Read(buf)
		require.NoError(t, err)
		total += n
	}
	assert.LessOrEqual(t, len(b.out)+len(b.hold), minMaxEventBytes+len(buf))
	rest, err := io.ReadAll(b)
	require.NoError(t, err)
	assert.Equal(t, len(stream), total+len(rest))
	require.NoError(t, b.Close())
}

func TestBodyUpstreamError(t *testing.T) {
	boom := errors.New("connection reset")
	var r record
	up := io.NopCloser(io.MultiReader(strings.NewReader(chat("a")), iotestErr{boom}))
	b := Wrap(up, Config{}, r.options(false, nil))
	got, err := io.ReadAll(b)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, chat("a"), string(got))
	out := r.outcome.Load()
	require.NotNil(t, out)
	assert.ErrorIs(t, out.Err, boom)
	assert.True(t, out.Committed)
	require.NoError(t, b.Close())
	assert.Equal(t, int32(1), r.finals.Load())
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

func TestBodyCloseBeforeEOF(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := script(t, []chunkAt{{0, chat("a")}, {time.Hour, chat("b")}}, nil)
		var r record
		b := Wrap(up, Config{IdleTimeout: time.Minute, AttemptDeadline: time.Hour}, r.options(false, nil))
		n, err := b.Read(make([]byte, 256))
		require.NoError(t, err)
		assert.Equal(t, len(chat("a")), n)
		require.NoError(t, b.Close())
		require.NoError(t, b.Close())
		out := r.outcome.Load()
		require.NotNil(t, out)
		assert.NoError(t, out.Err)
		assert.False(t, out.EOF)
		assert.True(t, out.Committed)
		assert.Equal(t, int32(1), r.finals.Load())
		// The timer is stopped: nothing fires later.
		time.Sleep(2 * time.Hour)
		assert.Equal(t, int32(0), r.aborts.Load())
		_, err = b.Read(make([]byte, 8))
		assert.ErrorIs(t, err, ErrClosed)
	})
}

func TestBodyCloseConcurrentWithBlockedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := script(t, []chunkAt{{time.Hour, chat("never")}}, nil)
		var r record
		b := Wrap(up, Config{}, r.options(false, nil))
		errc := make(chan error, 1)
		go func() {
			_, err := b.Read(make([]byte, 64))
			errc <- err
		}()
		time.Sleep(time.Second)
		require.NoError(t, b.Close())
		assert.ErrorIs(t, <-errc, io.ErrClosedPipe)
		assert.Equal(t, int32(1), r.finals.Load())
	})
}

func TestBodyIdleTimerRearmsOnProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var chunks []chunkAt
		for i := range 20 {
			chunks = append(chunks, chunkAt{time.Duration(i) * 4 * time.Second, ping})
		}
		var r record
		b := Wrap(script(t, chunks, nil), Config{IdleTimeout: 5 * time.Second}, r.options(false, nil))
		got, err := io.ReadAll(b)
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat(ping, 20), string(got))
		assert.Equal(t, int32(0), r.aborts.Load())
		require.NoError(t, b.Close())
	})
}

func TestBodyWrapAtPastStartHitsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := script(t, []chunkAt{{time.Hour, chat("late")}}, nil)
		var r record
		b := WrapAt(up, Config{AttemptDeadline: time.Minute}, r.options(false, nil), time.Now().Add(-2*time.Minute))
		_, err := b.Read(make([]byte, 64))
		assert.ErrorIs(t, err, ErrAttemptDeadline)
		assert.Equal(t, int32(1), r.finals.Load())
		require.NoError(t, b.Close())
	})
}

// Close racing with the idle timer still finalises exactly once.
func TestBodyCloseRacesTimer(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			up := script(t, []chunkAt{{time.Hour, chat("late")}}, nil)
			var r record
			b := Wrap(up, Config{IdleTimeout: time.Second}, r.options(false, nil))
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = b.Read(make([]byte, 64))
			}()
			time.Sleep(time.Second)
			_ = b.Close()
			<-done
			assert.Equal(t, int32(1), r.finals.Load())
			assert.LessOrEqual(t, r.aborts.Load(), int32(1))
		})
	}
}

// A guard that fails through the Observer directly (not through Read or the
// timer) is still a full abort: Read reports it only after OnAbort,
// Finalize and Cancel have run, once each.
func TestBodyAbortFoundByDirectCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := script(t, []chunkAt{{0, chat("a")}, {time.Hour, chat("late")}}, nil)
		var r record
		b := Wrap(up, Config{IdleTimeout: 10 * time.Second}, r.options(true, func() { up.CloseWithError(errors.New("canceled")) }))
		n, err := b.Read(make([]byte, 256))
		require.NoError(t, err)
		require.Equal(t, len(chat("a")), n)
		err = b.Observer().CheckAt(time.Now().Add(10 * time.Second))
		require.ErrorIs(t, err, ErrIdleTimeout)
		_, err = b.Read(make([]byte, 256))
		assert.ErrorIs(t, err, ErrIdleTimeout)
		assert.Equal(t, int32(1), r.aborts.Load())
		assert.Equal(t, int32(1), r.cancels.Load())
		require.Equal(t, int32(1), r.finals.Load())
		out := r.outcome.Load()
		assert.ErrorIs(t, out.Err, ErrIdleTimeout)
		assert.True(t, out.Committed)
		assert.Equal(t, int64(len(chat("a"))), out.Delivered)
		_, err = b.Read(make([]byte, 256))
		assert.ErrorIs(t, err, ErrIdleTimeout)
		require.NoError(t, b.Close())
		assert.Equal(t, int32(1), r.finals.Load())
		assert.Equal(t, int32(1), r.aborts.Load())
	})
}
