package cooldown

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// plainStore hides the optional fast paths of the memory store.
type plainStore struct{ s *MemoryStore }

func (p plainStore) Load(conn string) (Entry, bool)                 { return p.s.Load(conn) }
func (p plainStore) Update(conn string, fn func(*Entry, bool) bool) { p.s.Update(conn, fn) }
func (p plainStore) Range(fn func(string, Entry) bool)              { p.s.Range(fn) }

func TestCustomStore(t *testing.T) {
	tr := New(Config{Store: plainStore{NewMemoryStore()}})
	assert.Nil(t, tr.mem)
	assert.Nil(t, tr.sweeper)
	assert.Equal(t, Status{}, tr.StatusAt("k1", t0))
	tr.FailAt("k1", rateLimit, t0)
	assert.Equal(t, Status{State: Cooling, Until: t0.Add(3 * time.Second), Reason: "rate_limit_exceeded", Level: 1}, tr.StatusAt("k1", t0))
	sel := tr.SelectAt(nil, []string{"k1", "k2"}, t0)
	assert.Equal(t, []string{"k2"}, sel.Available)
	tr.SucceedAt("k1", t0)
	assert.Equal(t, Status{}, tr.StatusAt("k1", t0))
	cfg := tr.Config()
	cfg.EgressProviders[0] = "changed"
	assert.Equal(t, "opencode-go", tr.Config().EgressProviders[0], "Config returns a copy")
}

func TestShardSpread(t *testing.T) {
	s := NewMemoryStore()
	used := map[*memShard]bool{}
	for i := range 1000 {
		used[s.shard(fmt.Sprint("openai:key-", i))] = true
	}
	assert.Greater(t, len(used), numShards*3/4, "ids spread over the shards")
	assert.Equal(t, s.shard(""), s.shard(""))
}

func TestUnavailable(t *testing.T) {
	tr := New(Config{})
	tr.Register("a", Options{Provider: "openai"})
	tr.FailAt("b", rateLimit, t0)
	tr.FailAt("c", Failure{Status: 401}, t0)
	var ids []string
	for _, i := range tr.UnavailableAt(t0) {
		ids = append(ids, i.Conn)
	}
	assert.Equal(t, []string{"b", "c"}, ids)
	tr.FailAt("d", rateLimit, time.Now())
	ids = ids[:0]
	for _, i := range tr.Unavailable() {
		ids = append(ids, i.Conn)
	}
	assert.Contains(t, ids, "c")
	assert.Contains(t, ids, "d")
	assert.NotContains(t, ids, "a")
}
