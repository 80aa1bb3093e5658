package affinity

import "github.com/routeguard/routeguard/internal/seedhash"

// connSeeds seeds connHash; drawn per usage table, so the placement of
// connections cannot be predicted from outside the process.
type connSeeds struct{ seedhash.Seed }

func newConnSeeds() connSeeds { return connSeeds{seedhash.New()} }

// connHash returns a seeded 64-bit hash of the connection id s. It is the
// hash a use of a tracked connection computes, once, for both its shard and
// its index probe; on the short ids of BenchmarkRecordUseAt
// internal/seedhash costs about 45 instructions where hash/maphash.String
// cost 67.
func (k connSeeds) connHash(s string) uint64 { return k.String(s) }
