package gw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/queue/slotstore"
)

// RedisConfig is the "redis" section of the configuration: the Redis that
// several gateway replicas share, so that they agree on session leases
// (one owner per connection, generations that only rise, fleet-wide) and
// on each connection's maxConcurrent. Without a URL every replica keeps
// them on its own. Only a restart applies a change of it.
//
// With Redis on, leases live in Redis only, and the replicas also share
// their breakers' open periods, connection cooldowns and terminal states
// (kept until a reset), model lockouts and session pins: each change is
// applied locally first and published in the background, and every
// replica merges the others' changes into its own state, typically within
// milliseconds. The state file, if any, keeps a local durable copy of
// those, the others' changes included. The provider cooldown gate stays
// per replica. A capped connection costs two Redis calls per attempt
// (take and free its slot), nothing else on the request path does. While Redis is
// unreachable, lease operations answer 503 LEASE_SERVICE_UNAVAILABLE,
// fences keep admitting the leases this replica verified until they
// expire, and slots fall back to a local cap of the same size (or refuse,
// with failClosed).
type RedisConfig struct {
	// URL is redis://[user:password@]host:port[/db] (rediss:// for TLS);
	// empty means no Redis. The -redis flag overrides it. ${NAME}
	// references are read from the environment, like every string.
	URL string `json:"url,omitempty"`
	// Namespace starts every key (default "rg"); replicas that share
	// state must use the same one.
	Namespace string `json:"namespace,omitempty"`
	// FailClosed refuses a capped connection's attempts while Redis is
	// unreachable, instead of capping each replica on its own.
	FailClosed bool `json:"failClosed,omitempty"`
}

// validate checks the section; field paths are "redis.…".
func (c RedisConfig) validate() error {
	if c.URL != "" {
		if _, err := redis.ParseURL(c.URL); err != nil {
			return &ConfigError{Field: "redis.url", Problem: err.Error()}
		}
	}
	if strings.ContainsAny(c.Namespace, "{}") {
		return &ConfigError{Field: "redis.namespace", Problem: "must not contain '{' or '}'"}
	}
	return nil
}

// redisState is a State's Redis: the client, the shared state on it and
// the replicator of the layers' state.
type redisState struct {
	url string
	rdb *redis.Client
	rs  *redisstate.State
	rep *redisstate.Replicator
	// cds is the cooldown store the replicator writes to when the State
	// has no file (with one, the file's store is used).
	cds cooldown.Store
}

// replicaName names this process among the replicas: host, pid and a
// random suffix, so that two States of one process (tests) are two
// replicas too.
func replicaName() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}

// AttachRedis makes s keep leases and connection slots in the Redis of c,
// and share the layers' state there (url, when not empty, replaces
// c.URL), before the State is given to New.
// It makes no remote call and starts nothing (see Server.RunSlots and
// Server.RunReplication); a Redis that cannot be reached shows later, as
// the 503s and fallbacks RedisConfig describes. Without a URL it does
// nothing. Close closes the client.
func (s *State) AttachRedis(url string, c RedisConfig, onDegraded func(bool)) error {
	if url != "" {
		c.URL = url
	}
	if c.URL == "" {
		return nil
	}
	if err := c.validate(); err != nil {
		return err
	}
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		return err
	}
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	rs, err := redisstate.New(rdb, redisstate.Config{Namespace: c.Namespace, Replica: replicaName(),
		FailClosed: c.FailClosed, OnDegraded: onDegraded})
	if err != nil {
		rdb.Close()
		return fmt.Errorf("redis: %w", err)
	}
	s.redis = &redisState{url: opt.Addr, rdb: rdb, rs: rs, rep: rs.Replicator(redisstate.ReplicatorConfig{})}
	if s.st == nil {
		s.redis.cds = cooldown.NewMemoryStore()
	}
	return nil
}

// replicator is the replicator of the layers' state, or nil without
// Redis.
func (s *State) replicator() *redisstate.Replicator {
	if s == nil || s.redis == nil {
		return nil
	}
	return s.redis.rep
}

// Redis returns the address of the attached Redis, or "".
func (s *State) Redis() string {
	if s == nil || s.redis == nil {
		return ""
	}
	return s.redis.url
}

// slotStore is the shared slot store, or nil without Redis.
func (s *State) slotStore() slotstore.Store {
	if s == nil || s.redis == nil {
		return nil
	}
	return s.redis.rs.Slots()
}

func (s *State) closeRedis() error {
	if s == nil || s.redis == nil {
		return nil
	}
	r := s.redis
	s.redis = nil
	return r.rdb.Close()
}

// slotRenewal is how often RunSlots renews the slots held: a third of
// redisstate's default slot lifetime.
const slotRenewal = 5 * time.Second

// routerSet is the routers of the Server's configuration generations that
// may hold slots: the newest few (a request outlives a reload by minutes
// at most).
type routerSet struct {
	mu  sync.Mutex
	all []*combo.Router
}

const keptRouters = 4

func (rs *routerSet) add(r *combo.Router) *combo.Router {
	rs.mu.Lock()
	rs.all = append(rs.all, r)
	if len(rs.all) > keptRouters {
		rs.all = append(rs.all[:0], rs.all[len(rs.all)-keptRouters:]...)
	}
	rs.mu.Unlock()
	return r
}

func (rs *routerSet) list() []*combo.Router {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]*combo.Router(nil), rs.all...)
}

// RunSlots renews the shared connection slots of the requests in flight
// every 5 s, cancelling those whose slot was lost, until ctx ends. Run it
// on a goroutine of its own while the Server serves with Redis attached
// (see State.AttachRedis); without Redis it returns at once.
func (s *Server) RunSlots(ctx context.Context) error {
	if s.layers.Slots == nil {
		return nil
	}
	tick := time.NewTicker(slotRenewal)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		for _, r := range s.routers.list() {
			lost, err := r.RenewSlots(ctx)
			if s.logger != nil && (lost > 0 || err != nil) {
				s.logger.Warn("shared slots: renewal", "lost", lost, "err", err)
			}
		}
	}
}

// RunReplication shares the layers' state with the other replicas on the
// attached Redis (see RedisConfig) until ctx ends: it publishes this
// replica's breaker openings, cooldowns, lockouts and pins, and merges the
// others' into the layers that serve requests (a reload keeps them, so
// one run covers every configuration generation). Run it on a goroutine
// of its own while the Server serves, and wait for it to return before
// the State is closed; without Redis it returns at once. Only one Server
// of a State may run it.
func (s *Server) RunReplication(ctx context.Context) error {
	if s.repl == nil {
		return nil
	}
	return s.repl.Run(ctx, s.replLayers)
}

// ReplicationStats reports the replicator's counters; ok is false without
// Redis.
func (s *Server) ReplicationStats() (st redisstate.ReplicationStats, ok bool) {
	if s.repl == nil {
		return st, false
	}
	return s.repl.Stats(), true
}
