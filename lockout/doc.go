// Package lockout locks single models of a connection after model-level
// failures, so that one failing model (a per-model quota, a model the
// upstream does not know, a permission error for one mode) does not take its
// whole connection out of rotation.
//
// A [Lockout] keys its state on provider + connection + model. A failure is
// written under one of three keys, chosen by [ResolveScope]: the model's
// quota family (429, 403, 402; see [FamilyFunc]), the model itself (404), or
// the exact trimmed, lower-cased model (anything else, such as a 5xx). A
// check with [Lockout.LockedAt] looks at all three. Repeated failures within
// the escalation window lengthen the lock exponentially up to a cap, and
// successes ([Lockout.DecayAt]) halve the failure count, removing the lock
// when it reaches zero.
//
// Lockout is off by default ([Settings].Enabled). Every time-dependent
// method has an ...At form taking the current time; the plain form uses
// time.Now. State lives in memory, expired entries are pruned lazily, and
// the number of entries is capped ([Settings].MaxEntries).
package lockout
