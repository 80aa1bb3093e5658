package combotest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
)

// outcome is what a client sees of one call, in short.
func outcome(resp *http.Response, err error) string {
	if err != nil {
		if errors.Is(err, syscall.ECONNRESET) {
			return "reset"
		}
		return "error"
	}
	resp.Body.Close() // a stalled body is not read
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		return fmt.Sprintf("%d retry-after %s", resp.StatusCode, ra)
	}
	return fmt.Sprint(resp.StatusCode)
}

func mixedChaos(seed uint64) combotest.Chaos {
	return combotest.Chaos{
		Seed: seed, ServerError: 0.1, RateLimit: 0.1, Reset: 0.05, Stall: 0.05,
		RetryAfter: 3 * time.Second, Latency: 200 * time.Millisecond,
	}
}

// run sends n calls through the in-process transport and returns what the
// client saw and the upstream's call log.
func run(t *testing.T, c combotest.Chaos, n int) ([]string, []combotest.Call, *combotest.Upstream) {
	t.Helper()
	u := combotest.New()
	t.Cleanup(u.Close)
	u.SetLogSize(n)
	u.Chaos(c)
	client := &http.Client{Transport: u.Transport()}
	seen := make([]string, 0, n)
	for range n {
		seen = append(seen, outcome(get(t, client, "http://fake", "k")))
	}
	return seen, u.Calls(), u
}

func TestChaosSameSeedSameFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seenA, callsA, a := run(t, mixedChaos(42), 1000)
		seenB, callsB, b := run(t, mixedChaos(42), 1000)
		require.Len(t, callsA, 1000)
		assert.Equal(t, seenA, seenB, "client outcomes")
		for i := range callsA {
			require.Equal(t, callsA[i].Fault, callsB[i].Fault, "call %d fault", i)
			require.Equal(t, callsA[i].Delay, callsB[i].Delay, "call %d delay", i)
		}
		assert.Equal(t, a.Faults(), b.Faults())

		// The log, the counters and the client agree on every call.
		var want combotest.Faults
		for i, c := range callsA {
			switch c.Fault {
			case combotest.FaultServerError:
				want.ServerError++
				assert.Equal(t, "503", seenA[i], "call %d", i)
			case combotest.FaultRateLimit:
				want.RateLimit++
				assert.Equal(t, "429 retry-after 3", seenA[i], "call %d", i)
			case combotest.FaultReset:
				want.Reset++
				assert.Equal(t, "reset", seenA[i], "call %d", i)
			case combotest.FaultStall:
				want.Stall++
				assert.Equal(t, "200", seenA[i], "call %d", i)
			default:
				assert.Equal(t, "200", seenA[i], "call %d", i)
			}
			if c.Delay > 0 {
				want.Delayed++
				want.Delay += c.Delay
			}
		}
		assert.Equal(t, want, a.Faults())
		assert.Positive(t, want.ServerError)
		assert.Positive(t, want.RateLimit)
		assert.Positive(t, want.Reset)
		assert.Positive(t, want.Stall)

		seenC, _, _ := run(t, mixedChaos(43), 1000)
		assert.NotEqual(t, seenA, seenC, "another seed gives other faults")
	})
}

// Draws predicts, call by call, what an upstream in the same chaos mode
// picks; another seed predicts another sequence, and a Chaos that injects
// nothing draws nothing.
func TestChaosDrawsPredictTheUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, calls, _ := run(t, mixedChaos(42), 500)
		got := combotest.DrawsOf(calls)
		assert.Equal(t, mixedChaos(42).Draws(500), got)
		assert.NotEqual(t, mixedChaos(43).Draws(500), got)
		assert.Equal(t, mixedChaos(42).Draws(500)[:20], mixedChaos(42).Draws(20), "a prefix is the same draws")
		assert.Equal(t, make([]combotest.Draw, 3), combotest.Chaos{Seed: 9}.Draws(3))
		assert.Empty(t, mixedChaos(42).Draws(-1))
	})
}

// The loopback server draws the same faults as the transport for the same
// seed and the same calls.
func TestChaosSameFaultsOverLoopback(t *testing.T) {
	c := mixedChaos(7)
	c.Latency = 0 // real time over loopback
	inProcess, _, _ := run(t, c, 200)

	u := combotest.New()
	defer u.Close()
	u.Chaos(c)
	client := &http.Client{}
	defer client.CloseIdleConnections()
	loopback := make([]string, 0, 200)
	for range 200 {
		s := outcome(get(t, client, u.URL(), "k"))
		if s == "error" {
			s = "reset" // a dropped connection need not read as ECONNRESET
		}
		loopback = append(loopback, s)
	}
	assert.Equal(t, inProcess, loopback)
}

func TestChaosSharesWithinTwoPercent(t *testing.T) {
	const n = 20000
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			u := combotest.New()
			defer u.Close()
			u.Chaos(combotest.Chaos{Seed: seed, ServerError: 0.1, RateLimit: 0.1, Reset: 0.1, Stall: 0.1})
			client := &http.Client{Transport: u.Transport()}
			passed := 0
			for range n {
				if outcome(get(t, client, "http://fake", "")) == "200" {
					passed++
				}
			}
			f := u.Faults()
			passed -= f.Stall // a stall also answers 200
			for name, got := range map[string]int{
				"server error": f.ServerError, "rate limit": f.RateLimit, "reset": f.Reset, "stall": f.Stall,
			} {
				assert.InDelta(t, 0.10, float64(got)/n, 0.02, "%s: %d of %d", name, got, n)
			}
			assert.InDelta(t, 0.60, float64(passed)/n, 0.02, "no fault: %d of %d", passed, n)
			assert.Equal(t, n, f.ServerError+f.RateLimit+f.Reset+f.Stall+passed)
			assert.Zero(t, f.Delayed)
		})
	}
}

func TestChaosNormalizeClampsAndScalesShares(t *testing.T) {
	tests := []struct {
		name string
		in   combotest.Chaos
		want combotest.Chaos
	}{
		{"zero", combotest.Chaos{}, combotest.Chaos{RetryAfter: time.Second}},
		{"below 0 and NaN count as 0", combotest.Chaos{ServerError: -0.5, RateLimit: math.NaN(), Latency: -time.Second},
			combotest.Chaos{RetryAfter: time.Second}},
		{"above 1 counts as 1", combotest.Chaos{Reset: 1.5, RetryAfter: 5 * time.Second},
			combotest.Chaos{Reset: 1, RetryAfter: 5 * time.Second}},
		{"sum above 1 scaled to 1", combotest.Chaos{ServerError: 0.6, Stall: 0.9, RateLimit: 0.3, Seed: 9},
			combotest.Chaos{ServerError: 0.6 / 1.8, Stall: 0.9 / 1.8, RateLimit: 0.3 / 1.8, Seed: 9, RetryAfter: time.Second}},
		{"sum at most 1 kept", combotest.Chaos{ServerError: 0.5, Reset: 0.25, Latency: time.Second},
			combotest.Chaos{ServerError: 0.5, Reset: 0.25, Latency: time.Second, RetryAfter: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.Normalize()
			assert.InDelta(t, tt.want.ServerError, got.ServerError, 1e-12)
			assert.InDelta(t, tt.want.RateLimit, got.RateLimit, 1e-12)
			assert.InDelta(t, tt.want.Reset, got.Reset, 1e-12)
			assert.InDelta(t, tt.want.Stall, got.Stall, 1e-12)
			got.ServerError, got.RateLimit, got.Reset, got.Stall = tt.want.ServerError, tt.want.RateLimit, tt.want.Reset, tt.want.Stall
			assert.Equal(t, tt.want, got)
		})
	}
}

// Shares adding up to more than 1 fault every call, in proportion.
func TestChaosSharesAboveOneFaultEveryCall(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	u.Chaos(combotest.Chaos{Seed: 5, ServerError: 1, RateLimit: 1})
	client := &http.Client{Transport: u.Transport()}
	for range 2000 {
		assert.NotEqual(t, "200", outcome(get(t, client, "http://fake", "")))
	}
	f := u.Faults()
	assert.Equal(t, 2000, f.ServerError+f.RateLimit)
	assert.InDelta(t, 0.5, float64(f.ServerError)/2000, 0.05)
}

// Each fault as the client sees it, in process and over loopback.
func TestChaosFaultsAsClientSeesThem(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	for name, cl := range clients(u) {
		t.Run(name, func(t *testing.T) {
			u.Chaos(combotest.Chaos{ServerError: 1})
			resp, err := get(t, cl.c, cl.url, "")
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Contains(t, readAll(t, resp), `"code":503`)

			u.Chaos(combotest.Chaos{RateLimit: 1, RetryAfter: 7 * time.Second})
			resp, err = get(t, cl.c, cl.url, "")
			require.NoError(t, err)
			readAll(t, resp)
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			assert.Equal(t, "7", resp.Header.Get("Retry-After"))

			u.Chaos(combotest.Chaos{RateLimit: 1})
			resp, err = get(t, cl.c, cl.url, "")
			require.NoError(t, err)
			readAll(t, resp)
			assert.Equal(t, "1", resp.Header.Get("Retry-After"), "default Retry-After")

			u.Chaos(combotest.Chaos{Reset: 1})
			_, err = get(t, cl.c, cl.url, "")
			require.Error(t, err)
			if name == "transport" {
				assert.ErrorIs(t, err, syscall.ECONNRESET)
			}

			u.Chaos(combotest.Chaos{})
			resp, err = get(t, cl.c, cl.url, "")
			require.NoError(t, err)
			readAll(t, resp)
			assert.Equal(t, http.StatusOK, resp.StatusCode, "zero Chaos turns chaos off")
		})
	}
	assert.Equal(t, combotest.Faults{ServerError: 2, RateLimit: 4, Reset: 2}, u.Faults())
	http.DefaultClient.CloseIdleConnections()
}

func TestChaosLatencyAddsUniformDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := combotest.New()
		defer u.Close()
		u.Script("", combotest.OK("x").After(time.Second))
		u.Chaos(combotest.Chaos{Seed: 3, Latency: 10 * time.Second})
		client := &http.Client{Transport: u.Transport()}
		var total time.Duration
		for i := range 50 {
			start := time.Now()
			resp, err := get(t, client, "http://fake", "")
			require.NoError(t, err)
			readAll(t, resp)
			took := time.Since(start)
			c := u.Calls()[i]
			assert.Equal(t, time.Second+c.Delay, took, "call %d: scripted 1s plus the added delay", i)
			assert.GreaterOrEqual(t, c.Delay, time.Duration(0))
			assert.Less(t, c.Delay, 10*time.Second)
			total += c.Delay
		}
		f := u.Faults()
		assert.Equal(t, total, f.Delay)
		assert.Equal(t, 50, f.Delayed)
		assert.InDelta(t, 5*time.Second, total/50, float64(2*time.Second), "mean of uniform [0,10s)")
	})
}

func TestChaosStallStopsStreamAfterFirstEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := combotest.New()
		defer u.Close()
		u.Script("", combotest.TextStream(0, "first", "second", "third"))
		u.Chaos(combotest.Chaos{Stall: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://fake/", nil)
		start := time.Now()
		resp, err := (&http.Client{Transport: u.Transport()}).Do(req)
		require.NoError(t, err)
		assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 30*time.Second, time.Since(start), "the stream ends when the client gives up")
		assert.Equal(t, combotest.ChatDelta("first").Encode(), string(body))
		assert.Equal(t, combotest.FaultStall, u.Calls()[0].Fault)
	})
}

func TestChaosStallStopsPlainBodyHalfway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := combotest.New()
		defer u.Close()
		u.Script("", combotest.Reply{Body: "0123456789"}, combotest.Hang())
		u.Chaos(combotest.Chaos{Stall: 1})
		client := &http.Client{Transport: u.Transport()}
		for _, want := range []struct {
			body   string
			length int64
		}{{"01234", 10}, {`{"choices`, int64(len(combotest.OK("ok").Body))}} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://fake/", nil)
			resp, err := client.Do(req)
			require.NoError(t, err)
			assert.Equal(t, want.length, resp.ContentLength)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.True(t, strings.HasPrefix(string(body), want.body), "%q", body)
			assert.Equal(t, (want.length+1)/2, int64(len(body)))
		}
	})
}

// Over loopback a stalled stream delivers its first event, then nothing,
// and its handler ends when the client cancels.
func TestChaosStallOverLoopbackEndsOnCancel(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	u.Script("", combotest.TextStream(0, "first", "second"))
	u.Chaos(combotest.Chaos{Stall: 1})
	client := &http.Client{}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u.URL(), nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var first strings.Builder
	for !strings.HasSuffix(first.String(), "\n\n") {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		first.WriteString(line)
	}
	assert.Equal(t, combotest.ChatDelta("first").Encode(), first.String())

	stop := time.AfterFunc(50*time.Millisecond, cancel)
	defer stop.Stop()
	rest, err := io.ReadAll(br)
	assert.Error(t, err, "the stream ends only by the cancel")
	assert.Empty(t, string(rest))
}

func TestChaosRestartsSequenceAndKeepsCounts(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	client := &http.Client{Transport: u.Transport()}
	draw := func() []combotest.Fault {
		var fs []combotest.Fault
		for range 100 {
			outcome(get(t, client, "http://fake", ""))
			calls := u.Calls()
			fs = append(fs, calls[len(calls)-1].Fault)
		}
		return fs
	}
	c := combotest.Chaos{Seed: 11, ServerError: 0.3, RateLimit: 0.3}
	u.Chaos(c)
	first := draw()
	u.Chaos(c)
	assert.Equal(t, first, draw(), "Chaos starts the sequence over from its seed")
	f := u.Faults()
	assert.Equal(t, 200, u.Total())
	assert.Positive(t, f.ServerError)
	u.Chaos(combotest.Chaos{})
	draw()
	assert.Equal(t, f, u.Faults(), "counts survive turning chaos off")
}

// A fault replaces the scripted reply but the script still advances, and a
// handler sees the fault its call gets.
func TestChaosScriptAdvancesUnderFaults(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	var seen []combotest.Fault
	u.Handle("h", func(c combotest.Call) combotest.Reply {
		seen = append(seen, c.Fault)
		return combotest.OK("h")
	})
	u.Script("s", combotest.OK("one"), combotest.OK("two"))
	u.Chaos(combotest.Chaos{ServerError: 1})
	client := &http.Client{Transport: u.Transport()}
	assert.Equal(t, "503", outcome(get(t, client, "http://fake", "s")))
	assert.Equal(t, "503", outcome(get(t, client, "http://fake", "h")))
	assert.Equal(t, []combotest.Fault{combotest.FaultServerError}, seen)
	u.Chaos(combotest.Chaos{})
	resp, err := get(t, client, "http://fake", "s")
	require.NoError(t, err)
	assert.Contains(t, readAll(t, resp), `"content":"two"`)
}

func TestChaosConcurrentCallsCountExactly(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	u.SetLogSize(1600)
	u.Chaos(combotest.Chaos{Seed: 1, ServerError: 0.2, RateLimit: 0.2, Reset: 0.2, Stall: 0.2})
	client := &http.Client{Transport: u.Transport()}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				req, _ := http.NewRequest(http.MethodPost, "http://fake/", nil)
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	var want combotest.Faults
	for _, c := range u.Calls() {
		switch c.Fault {
		case combotest.FaultServerError:
			want.ServerError++
		case combotest.FaultRateLimit:
			want.RateLimit++
		case combotest.FaultReset:
			want.Reset++
		case combotest.FaultStall:
			want.Stall++
		}
	}
	assert.Equal(t, 1600, u.Total())
	assert.Equal(t, want, u.Faults())
}

func TestFaultString(t *testing.T) {
	for f, want := range map[combotest.Fault]string{
		combotest.FaultNone: "none", combotest.FaultServerError: "server error", combotest.FaultRateLimit: "rate limit",
		combotest.FaultReset: "reset", combotest.FaultStall: "stall", 200: "unknown",
	} {
		assert.Equal(t, want, f.String())
	}
}
