// Package restate decides what a failed upstream answer means.
//
// Classification runs in two steps over data tables:
//
//  1. Restatement rewrites a misleading status. Some providers answer an
//     exhausted quota with 403 or 400; a per-provider rule recognises the
//     answer by text markers (vetoed by exclude markers) and restates it as
//     429 with a default client retry time. See [Classifier.Restate].
//  2. Classification takes the restated status, the headers and the body and
//     returns a [Verdict]: the reason, the scope a provider rule gives, the
//     cooldown mode (fixed, backoff, base or none), the upstream retry hint
//     with its source and cap, and the flags permanent, credits exhausted,
//     daily quota, skip provider breaker and should fall back. See
//     [Classifier.ClassifyAt].
//
// The package only classifies; the backoff arithmetic, terminal states and
// lockouts belong to the layers that consume a Verdict.
//
// Every table (restatement rules, provider error rules, operator rules,
// signal phrases, emergency-fallback phrases) is plain data held by a
// [Classifier]. Tables are swapped atomically, so they can be replaced or
// extended at run time while other goroutines classify. The package-level
// functions use [Default].
//
// Bodies are scanned up to [Settings.MaxScan] bytes (64 KiB by default);
// anything beyond that is ignored. Retry hints are capped by
// [Settings.MaxRateLimitHint] (1 h) or [Settings.MaxQuotaHint] (30 days)
// depending on their kind.
package restate
