package routeguard

import (
	"strconv"
	"strings"
)

// Class is the credential class of a connection: how it authenticates
// upstream. Several layers shape their answers by it (the breaker's
// profile, the cooldown's profile, how a 429 is classified), so it is
// defined once here, in the root package, which every layer may import
// and which imports nothing of routeguard: the layers stay independent of
// each other and still speak one vocabulary.
//
// The zero value is [Unknown]. The breaker and the cooldown tracker treat
// an unknown connection as [APIKey]; the classifier reads an unknown
// connection's 429 the cautious way (as a quota that may last).
type Class uint8

const (
	// Unknown is a connection whose class was not said.
	Unknown Class = iota
	// APIKey is a connection authenticated by a static API key.
	APIKey
	// OAuth is a connection authenticated by an OAuth account.
	OAuth
	// Local is a self-hosted upstream (Ollama, vLLM, …) without a quota.
	Local
)

// String returns "", "apikey", "oauth" or "local".
func (c Class) String() string {
	switch c {
	case APIKey:
		return "apikey"
	case OAuth:
		return "oauth"
	case Local:
		return "local"
	}
	return ""
}

// ParseClass parses "apikey" (or "api_key", "api-key"), "oauth" and "local",
// in any case; "" is [Unknown]. Anything else is Unknown and false.
func ParseClass(s string) (Class, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return Unknown, true
	case "apikey", "api_key", "api-key":
		return APIKey, true
	case "oauth":
		return OAuth, true
	case "local":
		return Local, true
	}
	return Unknown, false
}

// MarshalText encodes the class as [Class.String] does.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText decodes what [ParseClass] accepts.
func (c *Class) UnmarshalText(b []byte) error {
	v, ok := ParseClass(string(b))
	if !ok {
		return &classError{string(b)}
	}
	*c = v
	return nil
}

type classError struct{ s string }

func (e *classError) Error() string {
	return "routeguard: unknown credential class " + strconv.Quote(e.s) + " (want apikey, oauth or local)"
}
