package redisstate

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// A replicated record is one field of the snapshot hash {<ns>:ev}:snap and
// the payload of one stream entry. Its field names what it is about:
//
//	b:<provider>                              breaker open period
//	g:<provider> NUL <connection>             gate cooldown (connection empty: the provider's)
//	cc:<connection>                           cooldown (transient part)
//	ct:<connection>                           cooldown (terminal part)
//	l:<provider> NUL <connection> NUL <model> model lockout (listed name)
//	p:<provider> NUL <hex session digest>     session pin
//
// Its value is an order key of three numbers, each 16 lower-case hex
// digits, then the writer's replica id, a newline and a JSON payload.
// Values of one field are merged by taking the greater in byte order (the
// scripts do the same in Lua), so the merge is idempotent, commutative and
// associative, and the join rules live in how the order key is built:
//
//	b   (reset version, until, cycles) the later end of an open period wins; a reset raises the version
//	g   (reset version, until, 0)      the later end of a gate cooldown wins; never shortened
//	cc  (reset version, until, 0)      the later until wins; a clear or reset raises the version
//	ct  (reset version, 1, end)        a terminal state (untimed ends at +∞) beats none; a reset raises the version
//	l   (reset version, until, 0)      a lockout never shortens; a clear raises the version
//	p   (time, 0, 0)                   last writer wins, by (time, replica)
const (
	kindBreaker  = "b"
	kindGate     = "g"
	kindCooling  = "cc"
	kindTerminal = "ct"
	kindLockout  = "l"
	kindPin      = "p"
)

const (
	numWidth   = 16
	orderWidth = 3 * numWidth
	// maxValue bounds a value read back from Redis.
	maxValue = 4096
)

// repValue is one decoded record value.
type repValue struct {
	n       [3]uint64
	replica string
	payload repPayload
}

// repPayload carries what a replica needs to apply a record. Times are Unix
// nanoseconds; zero means unset. Fields not used by a kind are omitted.
type repPayload struct {
	// Reset marks a clear or reset record: it carries no state.
	Reset bool `json:"x,omitempty"`

	State  string `json:"s,omitempty"` // cooldown state name, or lockout reason
	Reason string `json:"r,omitempty"`
	Level  int    `json:"lv,omitempty"` // cooldown level, lockout failure count, breaker failures
	Kind   int    `json:"k,omitempty"`  // breaker kind, lockout scope
	At     int64  `json:"a,omitempty"`  // breaker opened at, terminal at, lockout locked at, pin created
	Until  int64  `json:"u,omitempty"`
	Conn   string `json:"c,omitempty"` // pin connection
	Used   int64  `json:"lu,omitempty"`
	Del    bool   `json:"d,omitempty"` // pin deleted
}

// repNanos returns t as Unix nanoseconds, 0 for the zero time.
func repNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// repTime is the inverse of repNanos.
func repTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// ordNum maps a signed number into the order of its encoding.
func ordNum(n int64) uint64 { return uint64(n) ^ (1 << 63) }

// repNever is the order number of an untimed end.
const repNever = math.MaxUint64

// encodeValue builds a record value.
func encodeValue(n [3]uint64, replica string, p repPayload) string {
	b, _ := json.Marshal(p) // plain fields: cannot fail
	var sb strings.Builder
	sb.Grow(orderWidth + len(replica) + 1 + len(b))
	for _, x := range n {
		s := strconv.FormatUint(x, 16)
		for range numWidth - len(s) {
			sb.WriteByte('0')
		}
		sb.WriteString(s)
	}
	sb.WriteString(replica)
	sb.WriteByte('\n')
	sb.Write(b)
	return sb.String()
}

var errValue = errors.New("redisstate: malformed replicated value")

// decodeValue parses a record value read from Redis.
func decodeValue(s string) (repValue, error) {
	var v repValue
	if len(s) < orderWidth+1 || len(s) > maxValue {
		return v, errValue
	}
	for i := range v.n {
		x, err := strconv.ParseUint(s[i*numWidth:(i+1)*numWidth], 16, 64)
		if err != nil || strings.ContainsAny(s[i*numWidth:(i+1)*numWidth], "+-") {
			return v, errValue
		}
		v.n[i] = x
	}
	rest := s[orderWidth:]
	nl := strings.IndexByte(rest, '\n')
	if nl < 0 {
		return v, errValue
	}
	v.replica = rest[:nl]
	if err := json.Unmarshal([]byte(rest[nl+1:]), &v.payload); err != nil {
		return v, errValue
	}
	return v, nil
}

// cleanReplica makes a replica id safe for a record value.
func cleanReplica(r string) string {
	return strings.Map(func(c rune) rune {
		if c == '\n' || c < ' ' {
			return '_'
		}
		return c
	}, r)
}

// splitField returns a field's kind and key.
func splitField(f string) (kind, key string, ok bool) {
	i := strings.IndexByte(f, ':')
	if i <= 0 {
		return "", "", false
	}
	kind, key = f[:i], f[i+1:]
	switch kind {
	case kindBreaker, kindGate, kindCooling, kindTerminal, kindLockout, kindPin:
		return kind, key, key != ""
	}
	return "", "", false
}

// resetVersion returns the reset version of a value of a resettable field
// (the first number), 0 for no value.
func resetVersion(s string) uint64 {
	if len(s) < numWidth {
		return 0
	}
	x, _ := strconv.ParseUint(s[:numWidth], 16, 64)
	return x
}
