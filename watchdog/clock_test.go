package watchdog

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shiftedClocks returns clocks that disagree with the wall clock by about a
// day but advance with it. They must be built inside a bubble.
func shiftedClocks() []struct {
	name string
	now  func() time.Time
} {
	base := time.Now()
	fixed := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	return []struct {
		name string
		now  func() time.Time
	}{
		{"a day ahead", func() time.Time { return time.Now().Add(24 * time.Hour) }},
		{"a day behind", func() time.Time { return time.Now().Add(-24 * time.Hour) }},
		{"fixed 2030 date advancing", func() time.Time { return fixed.Add(time.Since(base)) }},
	}
}

// The watchdog reads one clock: with Options.Now shifted by a day from the
// wall clock, the idle timeout still cuts a blocked Read exactly when the
// stream has been silent for the timeout on that clock, and the chunk times
// the Finalize stats report are on that clock.
func TestOneClockIdleTimeoutFiresOnShiftedClock(t *testing.T) {
	for _, n := range []string{"a day ahead", "a day behind", "fixed 2030 date advancing"} {
		t.Run(n, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var now func() time.Time
				for _, c := range shiftedClocks() {
					if c.name == n {
						now = c.now
					}
				}
				up := script(t, []chunkAt{{0, chat("a")}, {2 * time.Second, ping}, {time.Hour, chat("never")}}, nil)
				var r record
				opts := r.options(false, nil)
				opts.Now = now
				start := now()
				wall := time.Now()
				b := WrapAt(up, Config{IdleTimeout: 10 * time.Second}, opts, start)
				buf := make([]byte, 4096)
				for range 2 {
					_, err := b.Read(buf)
					require.NoError(t, err)
				}
				_, err := b.Read(buf) // blocks until the idle timer cuts it
				var e *Error
				require.True(t, errors.As(err, &e), "got %v", err)
				assert.Equal(t, CodeIdleTimeout, e.Code)
				assert.Equal(t, 12*time.Second, time.Since(wall))
				assert.Equal(t, 12*time.Second, e.Elapsed)
				require.Equal(t, int32(1), r.finals.Load())
				st := r.outcome.Load().Stats
				assert.Equal(t, start, st.Started)
				assert.Equal(t, start.Add(2*time.Second), st.LastChunk)
				assert.Equal(t, 12*time.Second, st.Elapsed)
				assert.Equal(t, start.Add(2*time.Second), b.Stats().LastChunk)
			})
		})
	}
}

// The attempt deadline runs on the same clock: a stream that keeps sending
// heartbeats every second is cut exactly 5 s after its start on a clock a
// day off the wall clock, by the chunk arriving then.
func TestOneClockAttemptDeadlineFiresOnShiftedClock(t *testing.T) {
	for _, n := range []string{"a day ahead", "a day behind", "fixed 2030 date advancing"} {
		t.Run(n, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var now func() time.Time
				for _, c := range shiftedClocks() {
					if c.name == n {
						now = c.now
					}
				}
				var chunks []chunkAt
				for s := range 100 {
					chunks = append(chunks, chunkAt{time.Duration(s)*time.Second + 500*time.Millisecond, chat("x")})
				}
				var r record
				opts := r.options(false, nil)
				opts.Now = now
				wall := time.Now()
				b := WrapAt(script(t, chunks, nil), Config{AttemptDeadline: 5 * time.Second}, opts, now())
				buf := make([]byte, 4096)
				var err error
				reads := 0
				for err == nil {
					_, err = b.Read(buf)
					reads++
				}
				var e *Error
				require.True(t, errors.As(err, &e), "got %v", err)
				assert.Equal(t, CodeAttemptDeadline, e.Code)
				assert.Equal(t, 5*time.Second, time.Since(wall), "cut by the timer at 5 s")
				assert.Equal(t, 5*time.Second, e.Elapsed)
				assert.Equal(t, 6, reads, "five chunks, then the cut")
				assert.Equal(t, int32(1), r.aborts.Load())
				assert.Equal(t, int32(1), r.finals.Load())
			})
		})
	}
}

// DueAt takes the time explicitly and answers on that time's clock; Due is
// shorthand for DueAt(time.Now()). A clock that went back keeps the time
// already counted.
func TestOneClockDueAtExplicitTime(t *testing.T) {
	o := NewObserver(Config{IdleTimeout: 10 * time.Second, AttemptDeadline: time.Minute, ReadinessTimeout: new(time.Duration(0))})
	o.StartAt(at(0))
	require.NoError(t, o.ObserveAt([]byte(ping), at(4000)))
	due, ok := o.DueAt(at(6000))
	require.True(t, ok)
	assert.Equal(t, at(14000), due)
	due, _ = o.DueAt(at(1000)) // the clock went back: 4 s already counted, 10 s remain
	assert.Equal(t, at(11000), due)

	synctest.Test(t, func(t *testing.T) {
		o := NewObserver(Config{IdleTimeout: 10 * time.Second})
		o.Start()
		time.Sleep(3 * time.Second)
		due, ok := o.Due()
		require.True(t, ok)
		assert.Equal(t, 7*time.Second, time.Until(due))
	})
}

// Stream readiness, default on: heartbeats alone (pings, comments,
// "heartbeat" events) never make a stream ready, so 120 s after the start
// the attempt is aborted with 504 STREAM_READINESS_TIMEOUT through the
// usual hooks, and with heartbeats held back nothing has been committed.
func TestReadinessTimeoutHeartbeatsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		beats := []string{ping, comment, "event: heartbeat\ndata: {}\n\n", "data: {\"type\":\"heartbeat\"}\n\n", "\n"}
		var chunks []chunkAt
		for i := range 100 {
			chunks = append(chunks, chunkAt{time.Duration(i) * 7 * time.Second, beats[i%len(beats)]})
		}
		var r record
		wall := time.Now()
		b := Wrap(script(t, chunks, nil), Config{HoldHeartbeats: true}, r.options(false, nil))
		buf := make([]byte, 4096)
		var err error
		for err == nil {
			_, err = b.Read(buf)
		}
		var e *Error
		require.True(t, errors.As(err, &e), "got %v", err)
		assert.Equal(t, 120*time.Second, time.Since(wall))
		assert.Equal(t, CodeReadinessTimeout, e.Code)
		assert.Equal(t, ReasonReadinessTimeout, e.Reason)
		assert.Equal(t, 504, e.Status)
		assert.Equal(t, 120*time.Second, e.Limit)
		assert.Equal(t, 120*time.Second, e.Elapsed)
		assert.True(t, e.Timeout())
		assert.ErrorIs(t, err, ErrReadinessTimeout)
		assert.NotErrorIs(t, err, ErrIdleTimeout)
		assert.EqualError(t, err, "watchdog: stream produced no non-ping SSE event within 120000 ms")
		assert.False(t, b.Committed(), "heartbeats were held: the attempt may be retried elsewhere")
		assert.Equal(t, int32(1), r.aborts.Load())
		assert.Equal(t, int32(1), r.finals.Load())
		assert.ErrorIs(t, r.outcome.Load().Err, ErrReadinessTimeout)
		assert.False(t, r.outcome.Load().Stats.EventSeen)
	})
}

// A first real event one millisecond before the readiness timeout meets it:
// the stream then runs to its end. One arriving exactly at the timeout is
// too late.
func TestReadinessTimeoutMetJustInTime(t *testing.T) {
	cfg := Config{ReadinessTimeout: new(5 * time.Second)}
	synctest.Test(t, func(t *testing.T) {
		stream := []chunkAt{{0, ping}, {2 * time.Second, comment}, {4999 * time.Millisecond, chat("hi")},
			{9 * time.Second, ping}, {20 * time.Second, chat("there")}}
		var r record
		b := Wrap(script(t, stream, nil), cfg, r.options(false, nil))
		buf := make([]byte, 4096)
		var got strings.Builder
		var err error
		for err == nil {
			var n int
			n, err = b.Read(buf)
			got.Write(buf[:n])
		}
		require.ErrorIs(t, err, io.EOF)
		assert.Equal(t, ping+comment+chat("hi")+ping+chat("there"), got.String())
		assert.Equal(t, int32(0), r.aborts.Load())
		assert.True(t, r.outcome.Load().EOF)
		assert.True(t, r.outcome.Load().Stats.EventSeen)
	})

	o := NewObserver(cfg)
	o.StartAt(at(0))
	run(t, o, []step{{0, ping, false}, {4999, chat("hi"), false}})
	assert.NoError(t, o.CheckAt(at(5000)))
	assert.NoError(t, o.CheckAt(at(60000)))
	_, ok := o.DueAt(at(5000))
	assert.False(t, ok, "no guard left pending")

	late := NewObserver(cfg)
	late.StartAt(at(0))
	run(t, late, []step{{4999, ping, false}})
	due, ok := late.DueAt(at(4999))
	require.True(t, ok)
	assert.Equal(t, at(5000), due)
	assert.ErrorIs(t, late.ObserveAt([]byte(chat("hi")), at(5000)), ErrReadinessTimeout)
}

// Bytes that never complete an event do not make a stream ready, however
// many arrive: a line without a newline, lines without the blank line that
// ends an event, or a line longer than MaxEventBytes. The readiness timeout
// fires exactly on time while the bytes keep coming (so the idle timeout
// never does).
func TestReadinessTimeoutEndlessLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chunk string
		cfg   Config
	}{
		{"no newline", "xxxxxxxxxx", Config{}},
		{"data lines, no blank line", `data: {"choices":[{"delta":{"content":"x"}}]}` + "\n", Config{}},
		{"longer than MaxEventBytes", "data: " + strings.Repeat("y", 4000), Config{MaxEventBytes: minMaxEventBytes}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var chunks []chunkAt
				for i := range 1000 {
					chunks = append(chunks, chunkAt{time.Duration(i)*100*time.Millisecond + 50*time.Millisecond, tc.chunk})
				}
				cfg := tc.cfg
				cfg.ReadinessTimeout = new(5 * time.Second)
				cfg.IdleTimeout = time.Second
				var r record
				wall := time.Now()
				b := Wrap(script(t, chunks, nil), cfg, r.options(false, nil))
				buf := make([]byte, 8192)
				var err error
				for err == nil {
					_, err = b.Read(buf)
				}
				require.ErrorIs(t, err, ErrReadinessTimeout)
				assert.Equal(t, 5*time.Second, time.Since(wall))
				assert.False(t, b.Stats().EventSeen)
				assert.Equal(t, int64(0), b.Stats().Events)
				assert.Equal(t, int32(1), r.aborts.Load())
			})
		})
	}
}

// The readiness timeout also fires while Read blocks on a silent upstream,
// on the injected clock, and the Cancel hook unblocks the Read.
func TestReadinessTimeoutWhileReadBlocksOnShiftedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := script(t, []chunkAt{{0, ping}, {time.Hour, chat("never")}}, nil)
		var r record
		opts := r.options(true, func() { _ = up.Close() })
		opts.Now = shiftedClocks()[0].now
		wall := time.Now()
		b := Wrap(up, Config{ReadinessTimeout: new(90 * time.Second)}, opts)
		buf := make([]byte, 4096)
		_, err := b.Read(buf)
		require.NoError(t, err)
		_, err = b.Read(buf)
		require.ErrorIs(t, err, ErrReadinessTimeout)
		assert.Equal(t, 90*time.Second, time.Since(wall))
		assert.Equal(t, int32(1), r.cancels.Load())
		assert.Equal(t, int32(1), r.aborts.Load())
		assert.Equal(t, int32(1), r.finals.Load())
	})
}

// Readiness needs event parsing only until the first real event: without
// the throughput rule or held heartbeats parsing then stops, and
// StopParsing cannot stop it earlier.
func TestReadinessParsesOnlyUntilFirstEvent(t *testing.T) {
	o := NewObserver(Config{ReadinessTimeout: new(5 * time.Second)})
	o.StartAt(at(0))
	o.StopParsing()
	run(t, o, []step{{0, ping, false}, {1000, chat("ab"), false}, {2000, chat("cd"), false}, {9000, ping, false}})
	st := o.StatsAt(at(9000))
	assert.True(t, st.EventSeen)
	assert.Equal(t, int64(2), st.Events, "the ping and the first chat event")
	assert.Equal(t, int64(2), st.UsefulBytes)

	off := NewObserver(Config{ReadinessTimeout: new(time.Duration(0))})
	run(t, off, []step{{0, chat("ab"), false}, {600000, ping, false}})
	assert.Equal(t, int64(0), off.StatsAt(at(600000)).Events, "readiness off: nothing parsed")
}

// The readiness setting: nil is the default (120 s, on), a non-nil 0 is
// off, other values are clamped to 0..1 h. Normalize fills the default in
// and never shares or modifies the caller's pointer.
func TestReadinessTimeoutSetting(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *time.Duration
		want time.Duration
	}{
		{"nil is the default", nil, 120 * time.Second},
		{"zero is off", new(time.Duration(0)), 0},
		{"in range", new(115 * time.Second), 115 * time.Second},
		{"negative is off", new(-time.Second), 0},
		{"clamped to 1 h", new(2 * time.Hour), time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before time.Duration
			if tc.in != nil {
				before = *tc.in
			}
			c := Config{ReadinessTimeout: tc.in}
			assert.Equal(t, tc.want, c.settings().readiness)
			n := c.Normalize()
			assert.Equal(t, tc.want, n.settings().readiness)
			assert.Equal(t, n, n.Normalize(), "idempotent")
			require.NotNil(t, n.ReadinessTimeout)
			assert.Equal(t, tc.want, *n.ReadinessTimeout)
			if tc.in != nil {
				assert.NotSame(t, tc.in, n.ReadinessTimeout)
				assert.Equal(t, before, *tc.in, "the caller's value is not modified")
			}
			assert.Same(t, tc.in, c.ReadinessTimeout, "the receiver is not modified")
		})
	}

	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	assert.Nil(t, c.ReadinessTimeout)
	assert.Equal(t, defaultReadinessTimeout, c.settings().readiness)
	c, err = FromEnv(env(map[string]string{envReadinessTimeoutMs: "115000"}))
	require.NoError(t, err)
	assert.Equal(t, 115*time.Second, c.settings().readiness)
	c, err = FromEnv(env(map[string]string{envReadinessTimeoutMs: "0"}))
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), c.settings().readiness)
	for _, bad := range []string{"-1", "3600001", "soon"} {
		c, err = FromEnv(env(map[string]string{envReadinessTimeoutMs: bad}))
		assert.ErrorIs(t, err, ErrInvalidConfig, bad)
		assert.Nil(t, c.ReadinessTimeout, bad)
	}
}

// The readiness path allocates nothing per chunk, before and after the
// first event.
func TestReadinessPathAllocatesNothing(t *testing.T) {
	o := NewObserver(Config{ReadinessTimeout: new(time.Hour)})
	now := t0
	o.StartAt(now)
	beatChunk := []byte(ping + comment)
	beat := func() {
		now = now.Add(time.Millisecond)
		_ = o.ObserveAt(beatChunk, now)
		_ = o.CheckAt(now)
		_, _ = o.DueAt(now)
	}
	beat()
	if n := testing.AllocsPerRun(500, beat); n != 0 {
		t.Fatalf("heartbeats while waiting allocate %v times per run", n)
	}
	require.NoError(t, o.ObserveAt(chatChunk, now))
	if n := testing.AllocsPerRun(500, beat); n != 0 {
		t.Fatalf("chunks after readiness allocate %v times per run", n)
	}
	require.NoError(t, o.Err())
}
