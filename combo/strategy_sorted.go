package combo

import "math"

// leastUsed orders the targets by the router's request count, fewest first;
// a target the router has not seen counts 0, and equal counts keep the
// declared order.
type leastUsed struct{}

// Order sorts p.Targets by request count.
func (leastUsed) Order(p *Pick) {
	ts := p.Targets
	if len(ts) < 2 {
		return
	}
	var buf [stackKeys]keyed
	ks, pooled := keysFor(&buf, len(ts))
	for i, t := range ts {
		ks[i] = keyed{key: float64(statsOf(p, t).Requests), t: t}
	}
	sortKeyed(ts, ks)
	putKeys(pooled)
}

// costOptimized orders the targets by input price, cheapest first; a target
// whose price is unknown (PriceKnown false) goes last, and equal prices keep
// the declared order.
type costOptimized struct{}

// Order sorts p.Targets by price.
func (costOptimized) Order(p *Pick) {
	ts := p.Targets
	if len(ts) < 2 {
		return
	}
	var buf [stackKeys]keyed
	ks, pooled := keysFor(&buf, len(ts))
	for i, t := range ts {
		k := math.Inf(1)
		if t.PriceKnown && !math.IsNaN(t.Price) {
			k = t.Price
		}
		ks[i] = keyed{key: k, t: t}
	}
	sortKeyed(ts, ks)
	putKeys(pooled)
}

// contextOptimized orders the targets by context window, largest first;
// targets whose window is unknown (0) go last, and equal windows keep the
// declared order.
//
// When the request states its size (Request.PromptTokens > 0), targets
// whose known window is smaller are dropped. An unknown window is never
// dropped, and when no target is large enough none is dropped: the
// upstream's own answer then tells the client the prompt is too long.
type contextOptimized struct{}

// Order drops the targets too small for the request and sorts the rest by
// context window.
func (contextOptimized) Order(p *Pick) {
	ts := p.Targets
	if need := promptTokens(p); need > 0 {
		fits := 0
		for _, t := range ts {
			if t.ContextWindow <= 0 || t.ContextWindow >= need {
				fits++
			}
		}
		if fits > 0 && fits < len(ts) {
			kept := ts[:0]
			for _, t := range ts {
				if t.ContextWindow <= 0 || t.ContextWindow >= need {
					kept = append(kept, t)
				}
			}
			clear(ts[len(kept):])
			ts = kept
			p.Targets = kept
		}
	}
	if len(ts) < 2 {
		return
	}
	var buf [stackKeys]keyed
	ks, pooled := keysFor(&buf, len(ts))
	for i, t := range ts {
		ks[i] = keyed{key: -float64(max(t.ContextWindow, 0)), t: t}
	}
	sortKeyed(ts, ks)
	putKeys(pooled)
}

func promptTokens(p *Pick) int {
	if p.Request == nil {
		return 0
	}
	return p.Request.PromptTokens
}

// lastKnownGood (lkgp) moves the last known good target to the front; the
// others keep the declared order. The last known good is the provider and
// connection of the combo's target that succeeded most recently, eligible
// now or not. When it cannot take this request, the first eligible target
// of the same connection, else of the same provider, else one whose model
// is named "<provider>/…" goes first. With no success recorded yet, or no
// match, the declared order stands.
type lastKnownGood struct{}

// Order moves the last known good target first.
func (lastKnownGood) Order(p *Pick) {
	var good *Target
	var goodAt int64
	consider := func(t *Target) {
		if ls := statsOf(p, t).LastSuccess; !ls.IsZero() && (good == nil || ls.UnixNano() > goodAt) {
			good, goodAt = t, ls.UnixNano()
		}
	}
	for _, t := range p.Targets {
		consider(t)
	}
	if p.Combo != nil {
		for i := range p.Combo.Targets {
			consider(&p.Combo.Targets[i])
		}
	}
	if good == nil {
		return
	}
	// Match ranks: 3 the same target, 2 the same connection, 1 the same
	// provider, 0 a model under the provider's prefix.
	best, bestRank := -1, -1
	for i, t := range p.Targets {
		rank := -1
		switch {
		case t.Provider == good.Provider && t.Connection == good.Connection && t.Model == good.Model:
			rank = 3
		case t.Provider == good.Provider && t.Connection == good.Connection:
			rank = 2
		case t.Provider == good.Provider:
			rank = 1
		case len(t.Model) > len(good.Provider) && t.Model[len(good.Provider)] == '/' &&
			t.Model[:len(good.Provider)] == good.Provider:
			rank = 0
		}
		if rank > bestRank {
			best, bestRank = i, rank
		}
	}
	toFront(p.Targets, best)
}

// cacheHint is Config.CacheHint.
type cacheHint = func(req *Request, t *Target) float64

// cacheOptimized moves the target most likely to hold the request's cached
// prompt prefix (the highest positive Hint score, the first on a tie) to the
// front; the others keep the declared order. A nil Hint, or no positive
// score, keeps the declared order.
//
// The cache hint is meant to beat session stickiness: a router honouring it
// does not move the session's pinned connection ahead of the hinted target.
type cacheOptimized struct {
	Hint cacheHint
}

// OrdersSessions reports true: the connection likely to hold the prompt's
// cached prefix beats the session's pin (see [SessionOrderer]).
func (cacheOptimized) OrdersSessions() bool { return true }

// Order moves the hinted target first.
func (c cacheOptimized) Order(p *Pick) {
	if c.Hint == nil {
		return
	}
	best, bestScore := -1, 0.0
	for i, t := range p.Targets {
		if s := c.Hint(p.Request, t); s > bestScore {
			best, bestScore = i, s
		}
	}
	toFront(p.Targets, best)
}
