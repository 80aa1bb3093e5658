package combo_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
)

// declared keeps the declared order, like priority, and records which of
// the router's optional questions it was asked.
type declared struct {
	mu          sync.Mutex
	targetSlots []string
	connSlots   []string
}

func (*declared) Order(*combo.Pick) {}

type withTargetSlot struct{ *declared }

func (s withTargetSlot) TargetSlot(t *combo.Target) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targetSlots = append(s.targetSlots, t.String())
	return "mine:" + t.String()
}

type withConnectionSlot struct{ *declared }

func (s withConnectionSlot) ConnectionSlot(t *combo.Target) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connSlots = append(s.connSlots, t.Connection)
	return "mine:" + t.Connection
}

type ordersSessions struct{ *declared }

func (ordersSessions) OrdersSessions() bool { return true }

// A strategy says what it needs through optional interfaces, whatever name
// it is registered under: a TargetSlotter's every attempt takes the slot it
// names.
func TestStrategyTargetSlotterTakesASlotPerAttempt(t *testing.T) {
	f := newFleet(t, "openai")
	s := withTargetSlot{&declared{}}
	f.cfg.Strategies = map[string]combo.Strategy{"mine": s}
	f.rebuild()
	f.up["openai"].Script("k1", combotest.Error(503, "down"))
	c := &combo.Combo{Name: "c", Strategy: "mine", Targets: []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m")}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, "k2", res.Target.Connection)
	assert.Equal(t, []string{"openai/k1/m", "openai/k2/m"}, s.targetSlots, "one slot per attempt")
}

// A ConnectionSlotter's request takes one slot of its first target's
// connection, once, fallbacks included.
func TestStrategyConnectionSlotterTakesOneSlotPerRequest(t *testing.T) {
	f := newFleet(t, "openai")
	s := withConnectionSlot{&declared{}}
	f.cfg.Strategies = map[string]combo.Strategy{"mine": s}
	f.rebuild()
	f.up["openai"].Script("k1", combotest.Error(503, "down"))
	k1, k2 := target("openai", "k1", "m"), target("openai", "k2", "m")
	k1.MaxConcurrent, k2.MaxConcurrent = 2, 2
	c := &combo.Combo{Name: "c", Strategy: "mine", Targets: []combo.Target{k1, k2}}
	res, err := f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, "k2", res.Target.Connection)
	assert.Equal(t, []string{"k1"}, s.connSlots)
}

// A SessionOrderer keeps its own order: the session's pinned connection is
// not moved to the front. Any other strategy gets the pin as a connection
// preference.
func TestStrategySessionOrdererKeepsItsOrder(t *testing.T) {
	f := newFleet(t, "openai")
	f.cfg.Strategies = map[string]combo.Strategy{"mine": ordersSessions{&declared{}}, "plain": &declared{}}
	f.rebuild()
	session := func(r *combo.Request) { r.Session = "agent-1" }
	only2 := &combo.Combo{Name: "pin", Targets: []combo.Target{target("openai", "k2", "m")}}
	res, err := f.do(t, only2, session)
	require.NoError(t, err)
	require.Equal(t, "k2", res.Target.Connection, "the session is pinned to k2")

	both := []combo.Target{target("openai", "k1", "m"), target("openai", "k2", "m")}
	res, err = f.do(t, &combo.Combo{Name: "plain", Strategy: "plain", Targets: both}, session)
	require.NoError(t, err)
	assert.Equal(t, "k2", res.Target.Connection, "the pin chooses the connection")

	res, err = f.do(t, &combo.Combo{Name: "mine", Strategy: "mine", Targets: both}, session)
	require.NoError(t, err)
	assert.Equal(t, "k1", res.Target.Connection, "the strategy's order beats the pin")
}
