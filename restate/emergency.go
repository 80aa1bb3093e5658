package restate

// emergencyBillingWindow is how many bytes may separate an
// EmergencyBilling word from an EmergencyBillingNear word.
const emergencyBillingWindow = 40

// EmergencyTarget is where the emergency fallback sends a request.
type EmergencyTarget struct {
	Provider        string // provider id, default "nvidia"
	Model           string // model id, default "openai/gpt-oss-120b"
	MaxOutputTokens int    // output token bound, default 4096
}

// EmergencyFallback reports whether a failed request should be retried once
// on the emergency target: never when it is disabled or the request carries
// tools; otherwise on a 402, or when the body contains one of
// Tables.EmergencyPhrases (as a substring), or a Tables.EmergencyBilling word
// within 40 bytes of a Tables.EmergencyBillingNear word (both as whole
// words: "billing limit" counts, "billing: unlimited" does not).
func (c *Classifier) EmergencyFallback(status int, body []byte, hasTools bool) (EmergencyTarget, bool) {
	st := c.load()
	if st.set.EmergencyDisabled || hasTools {
		return EmergencyTarget{}, false
	}
	target := EmergencyTarget{Provider: st.set.EmergencyProvider, Model: st.set.EmergencyModel,
		MaxOutputTokens: st.set.EmergencyMaxTokens}
	if status == 402 {
		return target, true
	}
	text := lower(st.bound(body))
	if hasAny(text, st.t.EmergencyPhrases, substring) ||
		near(text, st.t.EmergencyBilling, words, st.t.EmergencyBillingNear, words, emergencyBillingWindow) {
		return target, true
	}
	return EmergencyTarget{}, false
}
