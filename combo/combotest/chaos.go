package combotest

import (
	"math"
	"math/rand/v2"
	"net/http"
	"time"
)

// Chaos configures seeded random faults for an [Upstream]; pass it to
// [Upstream.Chaos]. The zero Chaos injects nothing.
//
// For every call the upstream draws at most one fault kind from the shares
// and, when Latency is set, an added latency; the draws come from one
// random source seeded from Seed and are taken in the order the calls
// arrive, so the same Chaos and the same sequence of calls give the same
// faults, in process and over loopback alike.
//
// A fault replaces the reply the script chose (the script still advances
// by one, and a [Handler] is still called): ServerError sends
// Error(503, …), RateLimit sends [RateLimited](RetryAfter), Reset drops the
// connection like [Reset]. Stall keeps the scripted reply but stops it
// after it has started: a streamed reply sends its status, headers and
// first event; a plain reply its status, headers (with the full
// Content-Length) and the first half of its body; a [Reset] or [Hang]
// reply stalls as [OK]("ok") would. After that nothing arrives until the
// client cancels the request or the upstream is closed.
type Chaos struct {
	// Seed seeds the random source (a PCG). Calling [Upstream.Chaos] again
	// starts the sequence over from its Seed.
	Seed uint64

	// The shares of calls that get each fault, each in 0..1: 0.1 means one
	// call in ten on average. A share below 0 (or NaN) counts as 0, above 1
	// as 1. When the shares add up to more than 1 they are scaled down in
	// proportion so that they add up to exactly 1: every call then gets a
	// fault. The rest of the calls, 1 minus the sum, get their scripted
	// reply.
	ServerError float64 // 503 Service Unavailable with an OpenAI-style error body
	RateLimit   float64 // 429 Too Many Requests with a Retry-After header
	Reset       float64 // connection dropped: the client sees a transport error
	Stall       float64 // the answer starts, then stops until the client cancels

	// RetryAfter is the Retry-After of the 429 answers, sent in whole
	// seconds, rounded down as [RateLimited] does. 0 or less means 1s; a
	// Retry-After of 0 can be scripted with RateLimited(0).
	RetryAfter time.Duration

	// Latency, when above 0, delays every call, faulted or not, by a
	// duration drawn uniformly from [0, Latency), on top of any latency of
	// the reply. 0 or less adds none.
	Latency time.Duration
}

// DefaultRetryAfter is the Retry-After of chaos 429 answers when
// [Chaos.RetryAfter] is unset.
const DefaultRetryAfter = time.Second

// Normalize returns a copy of c with the settings [Upstream.Chaos] uses:
// shares clamped into 0..1 and scaled to a sum of 1 when they add up to
// more, RetryAfter defaulted, a negative Latency set to 0.
func (c Chaos) Normalize() Chaos {
	shares := [...]*float64{&c.ServerError, &c.RateLimit, &c.Reset, &c.Stall}
	sum := 0.0
	for _, s := range shares {
		*s = clampShare(*s)
		sum += *s
	}
	if sum > 1 {
		for _, s := range shares {
			*s /= sum
		}
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	c.Latency = max(c.Latency, 0)
	return c
}

func clampShare(x float64) float64 {
	switch {
	case !(x > 0): // also NaN
		return 0
	case x > 1:
		return 1
	}
	return x
}

// Fault is a kind of fault injected by chaos mode.
type Fault uint8

// The faults, as recorded in [Call.Fault].
const (
	FaultNone        Fault = iota // the scripted reply was sent as is (latency aside)
	FaultServerError              // 503 answer
	FaultRateLimit                // 429 answer with Retry-After
	FaultReset                    // connection dropped
	FaultStall                    // answer started, then stalled
)

var faultNames = [...]string{"none", "server error", "rate limit", "reset", "stall"}

// String returns a short lowercase name of f, such as "rate limit".
func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "unknown"
}

// Faults counts what chaos mode injected, over the life of an [Upstream]:
// turning chaos off or on again keeps the counts. The counts are exact even
// when the call log has dropped old calls.
type Faults struct {
	ServerError int
	RateLimit   int
	Reset       int
	Stall       int
	// Delayed is the number of calls given an added latency above 0, and
	// Delay the sum of the added latencies.
	Delayed int
	Delay   time.Duration
}

// Chaos turns chaos mode on with c, replacing any earlier chaos settings
// and starting the random sequence over from c.Seed; the zero Chaos turns
// it off. c is normalised as by [Chaos.Normalize]. Calls already in
// progress are not affected.
func (u *Upstream) Chaos(c Chaos) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.chaos = newChaos(c)
}

// newChaos is the live state of chaos mode c from the start of its
// sequence; nil when c injects nothing.
func newChaos(c Chaos) *chaos {
	c = c.Normalize()
	if c.ServerError+c.RateLimit+c.Reset+c.Stall == 0 && c.Latency == 0 {
		return nil
	}
	return &chaos{
		cfg:    c,
		shares: [...]float64{c.ServerError, c.RateLimit, c.Reset, c.Stall},
		rng:    rand.New(rand.NewPCG(c.Seed, c.Seed^pcgStream)),
	}
}

// Draw is what chaos mode picked for one call: its fault and its added
// latency, as recorded in [Call.Fault] and [Call.Delay].
type Draw struct {
	Fault Fault
	Delay time.Duration
}

// Draws returns the first n draws of chaos mode c, in the order calls
// arrive: what an [Upstream] given c by [Upstream.Chaos] picks for its
// first n calls. A soak test can check with it that a run met exactly the
// faults of its seed (compare with [DrawsOf] of the upstream's calls).
func (c Chaos) Draws(n int) []Draw {
	ch := newChaos(c)
	out := make([]Draw, max(n, 0))
	for i := range out {
		if ch != nil {
			out[i].Fault, out[i].Delay = ch.draw()
		}
	}
	return out
}

// DrawsOf returns the draws recorded in calls, in order.
func DrawsOf(calls []Call) []Draw {
	out := make([]Draw, len(calls))
	for i, c := range calls {
		out[i] = Draw{c.Fault, c.Delay}
	}
	return out
}

// Faults returns how many faults of each kind chaos mode has injected.
func (u *Upstream) Faults() Faults {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.faults
}

// pcgStream is the second PCG seed word, derived from Seed so that one
// number picks the whole sequence.
const pcgStream = 0x9e3779b97f4a7c15

// chaos is the live state of chaos mode. Guarded by Upstream.mu.
type chaos struct {
	cfg    Chaos // normalised
	shares [4]float64
	rng    *rand.Rand
}

// draw takes the fault and the added latency of the next call: one Float64
// when any share is above 0, then one Int64N when Latency is above 0.
func (c *chaos) draw() (Fault, time.Duration) {
	f := FaultNone
	if sum := c.shares[0] + c.shares[1] + c.shares[2] + c.shares[3]; sum > 0 {
		x := c.rng.Float64()
		acc, last := 0.0, FaultNone
		for i, s := range c.shares {
			if s == 0 {
				continue
			}
			acc += s
			last = Fault(i + 1)
			if x < acc {
				f = last
				break
			}
		}
		// Scaled shares can add up to a hair under 1: the sum then means
		// every call, and the rounding gap goes to the last kind.
		if f == FaultNone && sum >= 1-1e-9 {
			f = last
		}
	}
	var d time.Duration
	if c.cfg.Latency > 0 {
		d = time.Duration(c.rng.Int64N(int64(c.cfg.Latency)))
	}
	return f, d
}

// count adds one call's faults to the counters.
func (fs *Faults) count(f Fault, d time.Duration) {
	switch f {
	case FaultServerError:
		fs.ServerError++
	case FaultRateLimit:
		fs.RateLimit++
	case FaultReset:
		fs.Reset++
	case FaultStall:
		fs.Stall++
	}
	if d > 0 {
		fs.Delayed++
		if fs.Delay > math.MaxInt64-d {
			fs.Delay = math.MaxInt64
		} else {
			fs.Delay += d
		}
	}
}

// inject turns the scripted reply r into what the client gets for fault f
// with added latency d.
func inject(r Reply, f Fault, d time.Duration, retryAfter time.Duration) Reply {
	switch f {
	case FaultServerError:
		r = Error(http.StatusServiceUnavailable, "combotest: injected server error")
	case FaultRateLimit:
		r = RateLimited(retryAfter)
	case FaultReset:
		r = Reset()
	case FaultStall:
		r = stalled(r)
	}
	if d > 0 {
		if r.Latency > math.MaxInt64-d {
			r.Latency = math.MaxInt64
		} else {
			r.Latency += d
		}
	}
	return r
}

// stalled is r cut off after it has started. A plain reply keeps its body;
// the transports send only its first half (see stallBody).
func stalled(r Reply) Reply {
	if r.Reset || r.Hang {
		latency := r.Latency
		r = OK("ok")
		r.Latency = latency
	}
	if r.Stream != nil {
		s := &Stream{HangAfter: true}
		if len(r.Stream.Events) > 0 {
			s.Events = []Event{r.Stream.Events[0]}
		}
		r.Stream = s
	}
	return r
}

// stallBody is the part of a stalled plain body that is sent: its first
// half, rounded up.
func stallBody(body string) string { return body[:(len(body)+1)/2] }
