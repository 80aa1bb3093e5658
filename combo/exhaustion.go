package combo

// attemptFacts is what the exhaustion sets need to know about one failed
// attempt. The router fills it from the restated, classified failure.
type attemptFacts struct {
	Status           int
	Reason           string // classifier reason, e.g. "quota_exhausted"
	CreditsExhausted bool
	DailyQuota       bool
	QuotaExhausted   bool // the error text reads as a quota exhaustion
	RequestScoped    bool // the failure is about this request, not the target
	TokenLimit       bool // a 429 for a token-limit breach of this request
	EmptyAnswer      bool // a 502 for an empty answer, not a broken connection
	BreakerOpen      bool // the answer is a breaker-open refusal, not an upstream failure
	PerModelQuota    bool // the provider keeps quotas per model
}

// connKey names one connection of one provider.
type connKey struct{ provider, connection string }

// exhaustion holds the per-request skip sets: providers and connections that
// already failed during this request, so later targets of the same request
// do not repeat the failure. Small slices with linear search: a request
// touches few targets, and reuse keeps it allocation-free.
type exhaustion struct {
	providers   []string
	connections []connKey
	transient   []string // providers with a transient 429 in this request
}

func (e *exhaustion) reset() {
	e.providers = e.providers[:0]
	e.connections = e.connections[:0]
	e.transient = e.transient[:0]
}

func addString(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func (e *exhaustion) markProvider(p string) { e.providers = addString(e.providers, p) }

func (e *exhaustion) markConnection(p, c string) {
	k := connKey{p, c}
	for _, x := range e.connections {
		if x == k {
			return
		}
	}
	e.connections = append(e.connections, k)
}

// apply records a failed attempt on t. It reports whether the failure
// exhausted the connection or provider for the rest of the request (401/403
// or a provider-wide quota exhaustion).
func (e *exhaustion) apply(t *Target, f attemptFacts) bool {
	if t.Provider == "" {
		return false
	}
	switch {
	case f.Status == 401 || f.Status == 403:
		if t.Connection != "" {
			e.markConnection(t.Provider, t.Connection)
		} else {
			e.markProvider(t.Provider)
		}
		return true
	case !f.RequestScoped && !f.PerModelQuota &&
		(f.Reason == "quota_exhausted" || f.CreditsExhausted || f.DailyQuota || f.QuotaExhausted):
		e.markProvider(t.Provider)
		return true
	}
	if f.Status == 429 && !f.TokenLimit {
		e.transient = addString(e.transient, t.Provider)
	}
	switch f.Status {
	case 408, 500, 502, 503, 504, 524:
	default:
		return false
	}
	if f.BreakerOpen || f.RequestScoped {
		return false
	}
	if f.EmptyAnswer {
		return false
	}
	if f.Status == 500 && f.PerModelQuota {
		return false
	}
	if t.Connection != "" {
		e.markConnection(t.Provider, t.Connection)
	} else {
		e.markProvider(t.Provider)
	}
	return false
}

// match reports whether t's connection, or else its provider, is marked
// exhausted for the rest of this request. It allocates nothing.
func (e *exhaustion) match(t *Target) (byConnection, byProvider bool) {
	if t.Connection != "" {
		k := connKey{t.Provider, t.Connection}
		for _, x := range e.connections {
			if x == k {
				return true, false
			}
		}
	}
	for _, p := range e.providers {
		if p == t.Provider {
			return false, true
		}
	}
	return false, false
}

// skipped is the eligibility check: whether t must be skipped for the rest
// of this request.
func (e *exhaustion) skipped(t *Target) bool {
	if len(e.connections) == 0 && len(e.providers) == 0 {
		return false // nothing failed yet in this request
	}
	c, p := e.match(t)
	return c || p
}

// skip is skipped with the message that says why.
func (e *exhaustion) skip(t *Target) (string, bool) {
	switch c, p := e.match(t); {
	case c:
		return "connection " + t.Connection + " for provider " + t.Provider + " had connection error", true
	case p:
		return "provider " + t.Provider + " marked exhausted this request", true
	}
	return "", false
}
