package lease

// Internals the external tests use.
var (
	RetryAfter      = retryAfter
	ClampTTL        = clampTTL
	ValidOwner      = validOwner
	ParseGeneration = parseGeneration
)

const (
	OwnerLen     = ownerLen
	MinTTL       = minTTL
	MaxTTL       = maxTTL
	MinMaxOwners = minMaxOwners
	MaxMaxOwners = maxMaxOwners
	MinRetention = minRetention
	MaxRetention = maxRetention
	EnvTTL       = envTTL
	EnvMaxOwners = envMaxOwners
	EnvRetention = envRetention
)

// IsZero reports whether h is the zero digest.
func IsZero(h OwnerHash) bool { return h.isZero() }

// EqualHash is the constant-time digest comparison.
func EqualHash(a, b OwnerHash) bool { return equalHash(a, b) }

// StoreLen returns the number of owners an in-memory store remembers.
func StoreLen(s Store) int { return s.(*memoryStore).size() }

// SetMaxGeneration sets the highest generation an in-memory store
// remembers for owner, so tests can reach MaxGeneration.
func SetMaxGeneration(s Store, owner OwnerHash, gen uint64) {
	m := s.(*memoryStore)
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.owners[owner]
	if rec == nil {
		rec = &ownerRecord{}
		m.owners[owner] = rec
	}
	rec.maxGen = gen
}
