// Package restate decides what a failed upstream answer means: which
// status it really is, why it failed, how long the connection or model
// should rest, and what the router should do next.
//
// A user starts from three calls:
//
//	c := restate.New(restate.Config{})                      // built-in tables, every default
//	v := c.ClassifyAt(restate.Response{...}, now)           // after a failed attempt
//	v, ok := c.ClassifyEventAt(restate.Response{...}, ev, now) // an error event inside a 200 stream
//
// and acts on the [Verdict]: v.ShouldFallback and v.Terminal say whether to
// try the next target, v.Terminal and v.ModelScoped whether to cool the
// connection or lock the model, v.Mode, v.Cooldown and v.Hint how long.
//
// # The model
//
// Classification runs in two steps over data tables:
//
//  1. Restatement rewrites a misleading status. Some providers answer an
//     exhausted quota with 403 or 400; a per-provider rule ([RestateRule])
//     recognises the answer by text markers (vetoed by exclude markers) and
//     restates it as 429 with a default client retry time. The Verdict
//     keeps both statuses (Status, FromStatus) and the rule (RestateRule).
//  2. Classification takes the restated status, the headers and the body
//     and returns the Verdict: the reason, the rule that decided (Kind,
//     RuleID) and its scope, the cooldown mode (fixed, backoff, base or
//     none), the upstream retry hint with its source, and the flags a
//     consumer acts on. The flags hold every decision that depends on the
//     status or the text (a 401 is Expired, a 404 or 410 is ModelScoped, a
//     ban, exhausted credits, a rejected credential or a request-rejected
//     refusal is Terminal, …), so consumers never compare statuses
//     themselves. See [Classifier.ClassifyAt] for the order of the rules.
//
// The package only classifies; the backoff arithmetic, terminal states and
// lockouts belong to the layers that consume a Verdict. The credential
// class of the connection ([Response.Auth], a [routeguard.Class]) changes
// how a 429 and a 403 are read; an unknown class gets the cautious reading
// of an unknown provider.
//
// Every table (restatement rules, provider error rules, operator rules,
// signal phrases, emergency-fallback phrases) is plain data held by a
// [Classifier]: start from [DefaultTables], change it, and install it with
// [Classifier.SetTables]; operators add per-provider rules with
// [Classifier.SetOperatorRules]. Each phrase list is compared either as
// whole words or as substrings, fixed per list and named in its
// documentation (see [Signals]): the lists whose match parks a connection
// for long, such as a ban, credits or a billing suspension, match whole
// words only. A refused table or rule set is an [*Error] with code
// [CodeInvalidRule] naming the rule; the tables in use stay.
//
// # The zero value
//
// The zero [Classifier] is ready: the built-in tables and the default
// [Config]. The zero Config means every default, each documented beside
// its field; [Config.Normalize] shows the effective values. [FromEnv]
// reads the seed's environment variable, only when asked. Bodies are
// scanned up to [Config.MaxScan] bytes (64 KiB by default); anything beyond
// that is ignored. Retry hints are capped by [Config.MaxRateLimitHint]
// (1 h) or [Config.MaxQuotaHint] (30 days) depending on their kind.
//
// # Which calls to use
//
// [Classifier.ClassifyAt] for an HTTP failure (status 0 when no answer
// arrived), [Classifier.ClassifyEventAt] for an error event inside a 200
// SSE stream, [Classifier.HintAt] for the retry hint alone, and
// [Classifier.EmergencyFallback] to decide on the one-shot emergency
// target. The package-level [Classify], [ClassifyAt] and [ClassifyEventAt]
// use a classifier with the built-in tables and the default Config that
// nothing can change; to replace a rule, build your own Classifier.
//
// # Time, concurrency and cost
//
// Time is an input: daily quotas last until the next local midnight of the
// now passed in (its location is the local time), and absolute reset times
// are read relative to it. [Classifier.Classify] and [Classify] are
// shorthand for the At forms at time.Now().
//
// A Classifier is safe for concurrent use. Classification reads an
// immutable snapshot through one atomic load and never waits for a writer;
// SetTables, SetOperatorRules and SetConfig are serialised and swap a new
// snapshot.
// A classification lower-cases the scanned text once and allocates a few
// small values; no goroutine or timer is started.
package restate
