package redisstate_test

import (
	"testing"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/cooldown"
)

// BenchmarkReplicatedReads compares the hot-path reads with the
// replicator attached (the pin store wrapped, the cooldown store shared
// with it) and memory only.
func BenchmarkReplicatedReads(b *testing.B) {
	_, rdb := newMini(b)
	st := newState(b, rdb, redisstate.Config{})
	rep := st.Replicator(redisstate.ReplicatorConfig{})
	key, _ := affinity.NewKey("session", "conversation-1")
	now := time.Now()
	for _, bc := range []struct {
		name  string
		store affinity.Store
		onPin func(affinity.Event)
		cd    *cooldown.Tracker
	}{
		{"memory", affinity.NewMemoryStore(0), nil, cooldown.New(cooldown.Config{})},
		{"replicated", affinity.NewMemoryStore(0), rep.OnPinChange, cooldown.New(cooldown.Config{Store: cooldown.NewMemoryStore(), OnChange: rep.OnCooldownChange})},
		{"wrapped", rep.Pins(affinity.NewMemoryStore(0)), nil, nil},
	} {
		pins := affinity.New(affinity.Config{TTL: time.Hour, Store: bc.store, OnChange: bc.onPin})
		pins.PinAt(affinity.Request{Provider: "openai", Key: key}, "sk-1", now)
		if bc.cd == nil {
			bc.cd = cooldown.New(cooldown.Config{Store: cooldown.NewMemoryStore(), OnChange: rep.OnCooldownChange})
		}
		bc.cd.FailAt("sk-2", cooldown.Failure{Status: 429, RetryAfter: time.Minute}, now)
		b.Run("pin-lookup/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := pins.LookupAt("openai", key, now); !ok {
					b.Fatal("no pin")
				}
			}
		})
		b.Run("cooldown-status/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if bc.cd.StatusAt("sk-2", now).State != cooldown.Cooling {
					b.Fatal("not cooling")
				}
			}
		})
	}
}
