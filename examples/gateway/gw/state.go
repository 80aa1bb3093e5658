package gw

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/sqlitestate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lockout"
)

// StateMemory, as a state path, keeps the state in memory only: nothing is
// written and a restart starts empty.
const StateMemory = "memory"

// DefaultStateFile is the name of the state file when neither the
// configuration nor the -state flag names one. It lies in the directory
// of the configuration file.
const DefaultStateFile = "routeguard-state.db"

// StateConfig is the "state" section of the configuration: where the
// gateway keeps the state that survives a restart (leases, cooldowns and
// terminal connection states, session pins, breakers, model lockouts).
// Only a restart applies a change of it; a reload lists it as
// restart-required.
type StateConfig struct {
	// Path is the SQLite state file. Empty means DefaultStateFile; a
	// relative path is relative to the directory of the configuration
	// file; "memory" keeps the state in memory only. The -state flag
	// overrides it.
	Path string `json:"path,omitempty"`
	// Reset deletes the file at start, so the state starts empty (as the
	// -state-reset flag does). It applies at every start while it is set.
	Reset bool `json:"reset,omitempty"`
	// FlushIntervalMs is how often the efficiency state that changed
	// (cooldowns, pins, breakers, lockouts) is written, and so the most of
	// it a crash can lose. 0 means 250 ms; range 1..60 000. Leases are
	// written before every lease operation returns, whatever this says.
	FlushIntervalMs int `json:"flushIntervalMs,omitempty"`
}

// validate checks the section; field paths are "state.…".
func (c StateConfig) validate() error {
	if c.FlushIntervalMs < 0 || c.FlushIntervalMs > 60_000 {
		return &ConfigError{Field: "state.flushIntervalMs", Problem: "must be within 0..60000"}
	}
	return nil
}

// ResolveStatePath returns the state file the gateway uses: flag when it is
// not empty (as given, relative to the working directory), else the
// configuration's path (relative to the directory of configFile), else
// DefaultStateFile next to configFile. StateMemory stays StateMemory.
func ResolveStatePath(flag string, c StateConfig, configFile string) string {
	if flag != "" {
		return flag
	}
	p := c.Path
	if p == StateMemory {
		return p
	}
	if p == "" {
		p = DefaultStateFile
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(configFile), p)
}

// StateOptions configure OpenState.
type StateOptions struct {
	// Reset deletes the file before opening it.
	Reset bool
	// FlushInterval is the write-behind interval of the efficiency state;
	// zero means 250 ms.
	FlushInterval time.Duration
	// OnError receives the errors of the writer; nil drops them.
	OnError func(error)
}

// State is where a Server keeps its layers' state. The zero of *State
// (nil) and a State opened on StateMemory keep everything in memory. A
// State opened on a file is one SQLite file (package combo/sqlitestate):
// leases are written through (a lease operation is on disk before it
// returns), the other layers' changes are written behind by Run every
// flush interval. Open it once per process, before New, and pass it in
// Options.State; Run the writer while the Server serves; Close it after
// the HTTP server has drained. A reload keeps the Server and its layers,
// so it keeps the State too.
type State struct {
	st    *sqlitestate.State // nil in memory
	redis *redisState        // nil without Redis (see AttachRedis)
}

// OpenState opens the state file at path ("" or StateMemory: memory only).
// A file that cannot be used (damaged, not a state database, of a newer
// schema, unreadable) is an error naming the file; it is never reset
// unless o.Reset is set.
func OpenState(path string, o StateOptions) (*State, error) {
	if path == "" || path == StateMemory {
		return &State{}, nil
	}
	st, err := sqlitestate.Open(path, sqlitestate.Options{Reset: o.Reset, FlushInterval: o.FlushInterval, OnError: o.OnError})
	if err != nil {
		return nil, err // it names the file
	}
	return &State{st: st}, nil
}

// Path returns the state file, or StateMemory.
func (s *State) Path() string {
	if s == nil || s.st == nil {
		return StateMemory
	}
	return s.st.Path()
}

// Run writes the efficiency state behind, until ctx is done or Close is
// called, and writes what is pending before it returns. In memory it
// returns nil at once.
func (s *State) Run(ctx context.Context) error {
	if s == nil || s.st == nil {
		return nil
	}
	return s.st.Run(ctx)
}

// Close writes what is pending and closes the file; after it lease
// operations fail. It is idempotent; in memory it does nothing.
func (s *State) Close() error {
	if s == nil {
		return nil
	}
	rerr := s.closeRedis()
	if s.st == nil {
		return rerr
	}
	return errors.Join(s.st.Close(), rerr)
}

// Flush writes the pending efficiency state now.
func (s *State) Flush(ctx context.Context) error {
	if s == nil || s.st == nil {
		return nil
	}
	return s.st.Flush(ctx)
}

// pinStore is the session pin store of a Server on s.
func (s *State) pinStore() affinity.Store {
	if s == nil || s.st == nil {
		return affinity.NewMemoryStore(0)
	}
	return s.st.Pins()
}

// cooldownStore is the cooldown store; nil lets cooldown.New make its
// in-memory one.
func (s *State) cooldownStore() cooldown.Store {
	if s == nil {
		return nil
	}
	if s.st == nil {
		if s.redis != nil {
			return s.redis.cds // the replicator writes to it
		}
		return nil
	}
	return s.st.Cooldowns()
}

// chain returns a hook calling each non-nil f in turn, or nil for none.
func chain[E any](fs ...func(E)) func(E) {
	var out []func(E)
	for _, f := range fs {
		if f != nil {
			out = append(out, f)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return func(e E) {
		for _, f := range out {
			f(e)
		}
	}
}

// leaseStore is the lease store; nil lets lease.New make its in-memory
// one.
func (s *State) leaseStore() lease.Store {
	if s != nil && s.redis != nil {
		return s.redis.rs.Leases()
	}
	if s == nil || s.st == nil {
		return nil
	}
	return s.st.Leases()
}

// onBreaker is the breaker Set's change hook: the file's, then the
// replicator's; nil in memory without Redis.
func (s *State) onBreaker() func(breaker.Event) {
	if s == nil {
		return nil
	}
	var file, shared func(breaker.Event)
	if s.st != nil {
		file = s.st.OnBreakerChange
	}
	if r := s.replicator(); r != nil {
		shared = r.OnBreakerChange
	}
	return chain(file, shared)
}

// onCooldown is the cooldown Tracker's change hook: the replicator's (the
// file needs none: it is the Tracker's store); nil without Redis.
func (s *State) onCooldown() func(cooldown.Event) {
	if r := s.replicator(); r != nil {
		return r.OnCooldownChange
	}
	return nil
}

// onPin is the session pins' change hook: the replicator's; nil without
// Redis.
func (s *State) onPin() func(affinity.Event) {
	if r := s.replicator(); r != nil {
		return r.OnPinChange
	}
	return nil
}

// onGate is the provider cooldown gate's change hook: the file's, then the
// replicator's; nil in memory without Redis.
func (s *State) onGate() func(breaker.Event) {
	if s == nil {
		return nil
	}
	var file, shared func(breaker.Event)
	if s.st != nil {
		file = s.st.OnGateChange
	}
	if r := s.replicator(); r != nil {
		shared = r.OnGateChange
	}
	return chain(file, shared)
}

// onLockout is the lockout's change hook: the file's, then the
// replicator's; nil in memory without Redis.
func (s *State) onLockout() func(lockout.Event) {
	if s == nil {
		return nil
	}
	var file, shared func(lockout.Event)
	if s.st != nil {
		file = s.st.OnLockoutChange
	}
	if r := s.replicator(); r != nil {
		shared = r.OnLockoutChange
	}
	return chain(file, shared)
}

// restore puts the breakers, lockouts and gate entries kept in the file
// back into l.
// What is still pending is written first, so that a second Server on the
// same State starts from the latest state.
func (s *State) restore(l combo.Config, now time.Time) error {
	if s == nil || s.st == nil {
		return nil
	}
	if err := s.st.Flush(context.Background()); err != nil {
		return fmt.Errorf("state file %s: %w", s.st.Path(), err)
	}
	if err := s.st.Restore(sqlitestate.Layers{Breakers: l.Breakers, Lockouts: l.Lockouts, Gate: l.Gate}, now); err != nil {
		return fmt.Errorf("state file %s: %w", s.st.Path(), err)
	}
	return nil
}
