package gw

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/combo"
)

// sessionFor is the router's session key for a client's session: a
// digest of the client's API key id and the session key, so that two
// clients that send the same session id never share a pin. keyID is ""
// when the gateway has no API keys.
func sessionFor(keyID string, k affinity.Key) string {
	d := k.Digest()
	h := sha256.New()
	h.Write([]byte("routeguard-gateway-session\x00"))
	h.Write([]byte(keyID))
	h.Write([]byte{0})
	h.Write(d[:])
	return hex.EncodeToString(h.Sum(nil))
}

// clientView returns the terminal answer e as a client may see it: the
// exclusions name provider and model only (no connection id), and a
// connection held by another client's session lease is reported as
// "unavailable" with no recovery time, so that nothing of that lease is
// told. The Retry-After is recomputed from what remains. Other errors are
// returned as they are.
func clientView(e *combo.Error) *combo.Error {
	if e == nil || e.TerminalReason == "" {
		return e
	}
	c := *e
	c.Excluded = make([]combo.Exclusion, len(e.Excluded))
	hidden := false
	var earliest time.Duration
	for i, x := range e.Excluded {
		x.Connection = ""
		if x.Reason == combo.ReasonLeaseHeld {
			x.Reason, x.Detail, x.RetryAfter = combo.ReasonUnavailable, "", 0
			hidden = true
		}
		if x.RetryAfter > 0 && (earliest == 0 || x.RetryAfter < earliest) {
			earliest = x.RetryAfter
		}
		c.Excluded[i] = x
	}
	if hidden && c.Code == combo.CodeAllCoolingDown {
		c.RetryAfter = (earliest + time.Second - 1) / time.Second * time.Second
	}
	return &c
}
