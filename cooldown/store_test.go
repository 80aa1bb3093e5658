package cooldown

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// plainStore hides the optional fast paths of the memory store.
type plainStore struct{ s Store }

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
	assert.Equal(t, Status{}, tr.StatusAt("k2", t0))
	tr.SucceedAt("k1", t0)
	assert.Equal(t, Status{}, tr.StatusAt("k1", t0))
}

func TestShardSpread(t *testing.T) {
	s := NewMemoryStore().(*memoryStore)
	used := map[*memShard]bool{}
	for i := range 1000 {
		used[s.shard(fmt.Sprint("openai:key-", i))] = true
	}
	assert.Greater(t, len(used), numShards*3/4, "ids spread over the shards")
	assert.Equal(t, s.shard(""), s.shard(""))
}
