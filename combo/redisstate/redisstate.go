package redisstate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/internal/config"
)

// Config configures a State. The zero value gives the defaults: namespace
// "rg", the server's clock, 250 ms per remote call, 24 h retention, no
// fence mirror and no quarantine, 15 s slots that fall back to local caps
// during an outage.
type Config struct {
	// Namespace starts every key, inside the hash tag: "{rg:lease}:…",
	// "{rg:sem:<connection>}". Default "rg"; it must not contain '{' or
	// '}' (New refuses it).
	Namespace string

	// Replica names this process in slot holders' ids. Default the host
	// name and process id.
	Replica string

	// CallerClock makes the scripts use the now the caller passes instead
	// of the server's TIME. Off by default: the server's clock serves the
	// whole fleet, and the caller's now only decides how fresh the fence
	// mirror is. Turn it on in tests or when every replica shares one
	// trusted clock.
	CallerClock bool

	// Timeout bounds every remote call (a context deadline on top of the
	// caller's). Default 250 ms; range 1 ms..10 s; zero or negative means
	// the default. With a client whose ContextTimeoutEnabled is off the
	// call is abandoned at the deadline and its reply discarded.
	Timeout time.Duration

	// Retention is how long an owner whose last lease ended, and a
	// connection's last end time, are remembered (idempotent release,
	// generations). An owner forgotten after it still never gets a
	// generation twice (see [State.Leases]). Default 24 h; range 1 min..30
	// days; zero or negative means the default.
	Retention time.Duration

	// FenceStaleness (S) is how long a lease verified by this process may
	// answer Fence without a remote call. Default 0: every Fence asks
	// Redis. Range 0..10 s (clamped). A positive S needs
	// ReleaseQuarantine ≥ S + ClockSkew, else New refuses the Config.
	FenceStaleness time.Duration

	// ReleaseQuarantine (Q) is how long a connection whose lease ended
	// (released, moved, invalidated, expired) stays refused to a different
	// owner; its owner may take it again at once. Default 0; range 0..1
	// min (clamped). A capacity refusal's Until is then the occupant's
	// expiry + Q.
	ReleaseQuarantine time.Duration

	// ClockSkew is the largest difference allowed between this process's
	// clock and the server's, for the quarantine check. Default 0 means
	// 500 ms; range 1 ms..10 s.
	ClockSkew time.Duration

	// StreamLen is roughly how many lease events the stream {ns:lease}:ev
	// keeps (XADD MAXLEN ~). Default 10 000; range 100..10 000 000;
	// negative: no events are written.
	StreamLen int

	// SlotTTL is how long a concurrency slot lives without a renewal.
	// Default 15 s; range 1 s..10 min.
	SlotTTL time.Duration

	// FailClosed makes slot acquisition refuse (ErrUnavailable) while
	// Redis is unreachable. Off by default: a local cap of the same size
	// admits instead, so each replica enforces the cap on its own.
	FailClosed bool

	// Breaker is the circuit breaker remote calls go through, as provider
	// BreakerName. Nil means a new one that opens after 5 failed calls and
	// probes again after 1 s.
	Breaker *breaker.Set
	// BreakerName is the provider name of Redis in Breaker. Default
	// "redis".
	BreakerName string

	// OnDegraded, if set, is called with true when remote calls start to
	// fail (or the breaker refuses them) and with false when one succeeds
	// again; synchronously, on the goroutine of the call, without a lock
	// of the package held. It must not block.
	OnDegraded func(degraded bool)

	// OnDataLoss, if set, is called when a lease call finds that Redis
	// lost the lease dataset (restarted empty, or failed over to a
	// replica without it), after this process re-seeded the leases it
	// holds; on the goroutine of that call, without a lock of the package
	// held. New leases are refused for ReleaseQuarantine after the loss is
	// noticed, so that other processes can re-seed theirs.
	OnDataLoss func(DataLoss)

	// Now is the clock of the breaker and of slot holders' fallbacks.
	// Default time.Now.
	Now func() time.Time
}

// Normalize returns a copy of c with every default filled in and every
// field clamped into its range. It does not modify c.
func (c Config) Normalize() Config {
	if c.Namespace == "" {
		c.Namespace = "rg"
	}
	if c.Replica == "" {
		host, _ := os.Hostname()
		c.Replica = host + "-" + strconv.Itoa(os.Getpid())
	}
	c.Timeout = config.Dur(c.Timeout, 250*time.Millisecond, time.Millisecond, 10*time.Second)
	c.Retention = config.Dur(c.Retention, 24*time.Hour, time.Minute, 30*24*time.Hour)
	c.FenceStaleness = min(max(c.FenceStaleness, 0), 10*time.Second)
	c.ReleaseQuarantine = min(max(c.ReleaseQuarantine, 0), time.Minute)
	c.ClockSkew = config.Dur(c.ClockSkew, 500*time.Millisecond, time.Millisecond, 10*time.Second)
	switch {
	case c.StreamLen == 0:
		c.StreamLen = 10000
	case c.StreamLen > 0:
		c.StreamLen = min(max(c.StreamLen, 100), 10000000)
	}
	c.SlotTTL = config.Dur(c.SlotTTL, 15*time.Second, time.Second, 10*time.Minute)
	if c.BreakerName == "" {
		c.BreakerName = "redis"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// ErrInvalidConfig reports a Config that New refuses.
var ErrInvalidConfig = errors.New("redisstate: invalid configuration")

// ErrUnavailable reports that Redis could not be reached in time, or that
// the breaker in front of it is open. Lease calls report it as a lease
// *Error with CodeServiceUnavailable (503) instead.
var ErrUnavailable = errors.New("redisstate: redis unavailable")

// State is routeguard's shared state in one Redis: the lease store
// ([State.Leases]) and the concurrency slot store ([State.Slots]).
// It is safe for concurrent use.
type State struct {
	rdb      redis.UniversalClient
	cfg      Config
	brk      *breaker.Set
	deadline bool // the client honours context deadlines itself

	degraded atomic.Bool
	hookMu   sync.Mutex // orders OnDegraded calls

	leases *leaseStore
	slots  *redisSlots
}

// New returns the shared state on rdb, the caller's client (standalone,
// Sentinel or Cluster). It makes no remote call.
func New(rdb redis.UniversalClient, c Config) (*State, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidConfig)
	}
	c = c.Normalize()
	if strings.ContainsAny(c.Namespace, "{}") {
		return nil, fmt.Errorf("%w: Namespace %q contains a brace", ErrInvalidConfig, c.Namespace)
	}
	if c.FenceStaleness > 0 && c.ReleaseQuarantine < c.FenceStaleness+c.ClockSkew {
		return nil, fmt.Errorf("%w: ReleaseQuarantine %v is below FenceStaleness %v + ClockSkew %v",
			ErrInvalidConfig, c.ReleaseQuarantine, c.FenceStaleness, c.ClockSkew)
	}
	s := &State{rdb: rdb, cfg: c, brk: c.Breaker}
	if s.brk == nil {
		s.brk = breaker.NewSet(breaker.Config{Profiles: map[string]breaker.Profile{
			c.BreakerName: {OpenAt: 5, Reset: time.Second, MaxMultiplier: 8},
		}})
	}
	switch cl := rdb.(type) {
	case *redis.Client:
		s.deadline = cl.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		s.deadline = cl.Options().ContextTimeoutEnabled
	}
	s.leases = newLeaseStore(s)
	s.slots = newRedisSlots(s)
	return s, nil
}

// Degraded reports whether the last remote call failed or was refused by
// the breaker.
func (s *State) Degraded() bool { return s.degraded.Load() }

func (s *State) setDegraded(d bool) {
	if s.degraded.Load() == d {
		return
	}
	s.hookMu.Lock()
	changed := s.degraded.Swap(d) != d
	hook := s.cfg.OnDegraded
	s.hookMu.Unlock()
	if changed && hook != nil {
		hook(d)
	}
}

// unavailableError is a remote failure: it matches ErrUnavailable and
// carries its cause.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string { return "redisstate: redis unavailable: " + e.cause.Error() }
func (e *unavailableError) Unwrap() []error {
	return []error{ErrUnavailable, e.cause}
}

// do runs one remote call fn through the breaker, bounded by the
// configured timeout. A failure of Redis (transport, timeout, breaker
// open, a server that cannot serve) comes back as an *unavailableError;
// a cancelled caller's context as its own error.
func (s *State) do(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done, err := s.brk.AllowReportAt(s.cfg.BreakerName, s.cfg.Now())
	if err != nil {
		s.setDegraded(true)
		return &unavailableError{err}
	}
	cctx, cancel := context.WithTimeout(ctx, s.callTimeout(ctx))
	defer cancel()
	err = s.call(cctx, fn)
	switch {
	case err == nil || errors.Is(err, redis.Nil):
		done(breaker.Report{Outcome: breaker.Success, At: s.cfg.Now()})
		s.setDegraded(false)
		return err
	case ctx.Err() != nil:
		// The caller gave up: says nothing about Redis.
		done(breaker.Report{At: s.cfg.Now()})
		return ctx.Err()
	case !remoteFailure(err):
		done(breaker.Report{Outcome: breaker.Success, At: s.cfg.Now()})
		s.setDegraded(false)
		return err
	}
	done(breaker.Report{Outcome: breaker.Failure, At: s.cfg.Now()})
	s.setDegraded(true)
	return &unavailableError{err}
}

// call runs fn, and returns at ctx's deadline even when the client does
// not honour it.
func (s *State) call(ctx context.Context, fn func(ctx context.Context) error) error {
	if s.deadline {
		return fn(ctx)
	}
	ch := make(chan error, 1)
	go func() { ch <- fn(ctx) }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// remoteFailure reports whether err means that Redis could not serve the
// call: a transport error, a timeout, or a server reply that says it
// cannot serve now. Other server replies (a script error) are answers.
func remoteFailure(err error) bool {
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		for _, p := range []string{"LOADING", "BUSY", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "OOM", "NOREPLICAS"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed) ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection")
}
