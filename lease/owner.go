package lease

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"strings"
)

const (
	// OwnerPrefix starts every owner token.
	OwnerPrefix = "vlo_"
	// OwnerLen is the length of an owner token: the prefix and 43 base64url
	// characters (256 random bits).
	OwnerLen = len(OwnerPrefix) + 43

	// MaxGeneration is the largest generation a lease can have, 2^53 − 1,
	// so that generations survive a round trip through JSON numbers.
	MaxGeneration uint64 = 1<<53 - 1

	// HeaderOwner carries the owner token on lifecycle and inference
	// requests. It is the canonical form of X-OmniRoute-Lease-Owner.
	HeaderOwner = "X-Omniroute-Lease-Owner"
	// HeaderGeneration carries the generation on inference requests. It is
	// the canonical form of X-OmniRoute-Lease-Generation.
	HeaderGeneration = "X-Omniroute-Lease-Generation"
)

// OwnerHash is the SHA-256 digest of an owner token. It is the only form of
// the owner that is stored; the zero value means "no owner".
type OwnerHash [sha256.Size]byte

// HashOwner returns the digest of token without validating it. Use
// [ParseOwner] for input from clients.
func HashOwner(token string) OwnerHash {
	if len(token) <= OwnerLen {
		// A stack copy keeps the hot path free of allocation.
		var buf [OwnerLen]byte
		n := copy(buf[:], token)
		return sha256.Sum256(buf[:n])
	}
	return sha256.Sum256([]byte(token))
}

// IsZero reports whether h is the zero hash (no owner).
func (h OwnerHash) IsZero() bool { return h == OwnerHash{} }

// Equal reports whether h and o are the same digest. The comparison takes
// the same time wherever the digests differ.
func (h OwnerHash) Equal(o OwnerHash) bool {
	var v uint64
	for i := 0; i < len(h); i += 8 {
		v |= binary.LittleEndian.Uint64(h[i:]) ^ binary.LittleEndian.Uint64(o[i:])
	}
	// The low half of v|v>>32 is zero exactly when v is.
	return subtle.ConstantTimeEq(int32(uint32(v|v>>32)), 0) == 1
}

// String returns the digest as 64 lowercase hexadecimal characters.
func (h OwnerHash) String() string { return hex.EncodeToString(h[:]) }

// NewOwner returns a fresh owner token: [OwnerPrefix] followed by the
// base64url encoding (no padding) of 32 bytes from crypto/rand.
func NewOwner() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return OwnerPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// ValidOwner reports whether token, taken as it is (not trimmed), matches
// ^vlo_[A-Za-z0-9_-]{43}$.
func ValidOwner(token string) bool {
	if len(token) != OwnerLen || !strings.HasPrefix(token, OwnerPrefix) {
		return false
	}
	for i := len(OwnerPrefix); i < len(token); i++ {
		c := token[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// ParseOwner trims surrounding white space from token, validates it with
// [ValidOwner] and returns its digest. An empty token gives
// [ErrContextRequired], a malformed one [ErrContextInvalid]. It does not
// allocate.
func ParseOwner(token string) (OwnerHash, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return OwnerHash{}, ErrContextRequired
	}
	if !ValidOwner(token) {
		return OwnerHash{}, ErrContextInvalid
	}
	return HashOwner(token), nil
}

// ParseGeneration parses a generation as sent in [HeaderGeneration] or a
// JSON body: after trimming white space it must match ^[1-9][0-9]*$ and be
// at most [MaxGeneration]. Anything else gives [ErrContextInvalid].
func ParseGeneration(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 16 || s[0] == '0' {
		return 0, ErrContextInvalid
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, ErrContextInvalid
		}
		n = n*10 + uint64(c-'0')
	}
	if n > MaxGeneration {
		return 0, ErrContextInvalid
	}
	return n, nil
}

// single returns the only value of key in h. ok is false when the header
// is absent or empty; multiple is true when it was sent more than once.
func single(h http.Header, key string) (v string, ok, multiple bool) {
	vs := h[key]
	switch len(vs) {
	case 0:
		return "", false, false
	case 1:
		v = strings.TrimSpace(vs[0])
		return v, v != "", false
	default:
		return "", true, true
	}
}

// ParseOwnerHeader reads and validates [HeaderOwner] from h (canonical key).
// A missing or empty header gives [ErrContextRequired]; a malformed or
// repeated one [ErrContextInvalid]. It does not allocate.
func ParseOwnerHeader(h http.Header) (OwnerHash, error) {
	v, ok, multiple := single(h, HeaderOwner)
	switch {
	case multiple:
		return OwnerHash{}, ErrContextInvalid
	case !ok:
		return OwnerHash{}, ErrContextRequired
	}
	return ParseOwner(v)
}

// ParseHeader reads the lease context of an inference request: the owner
// from [HeaderOwner] and the generation from [HeaderGeneration]. A missing
// owner gives [ErrContextRequired]; a malformed owner, or a missing,
// malformed or repeated generation gives [ErrContextInvalid]. Callers that
// need to know whether a request carries a lease at all check
// [HasLeaseHeaders] first. ParseHeader does not allocate.
func ParseHeader(h http.Header) (owner OwnerHash, generation uint64, err error) {
	owner, err = ParseOwnerHeader(h)
	if err != nil {
		return OwnerHash{}, 0, err
	}
	v, ok, multiple := single(h, HeaderGeneration)
	if !ok || multiple {
		return OwnerHash{}, 0, ErrContextInvalid
	}
	generation, err = ParseGeneration(v)
	if err != nil {
		return OwnerHash{}, 0, err
	}
	return owner, generation, nil
}

// HasLeaseHeaders reports whether h carries either lease header under any
// capitalisation.
func HasLeaseHeaders(h http.Header) bool {
	for k := range h {
		if isLeaseHeader(k) {
			return true
		}
	}
	return false
}

// StripHeaders removes both lease headers from h, under any
// capitalisation, so that they never reach an upstream or a log.
func StripHeaders(h http.Header) {
	for k := range h {
		if isLeaseHeader(k) {
			delete(h, k)
		}
	}
}

func isLeaseHeader(k string) bool {
	return strings.EqualFold(k, HeaderOwner) || strings.EqualFold(k, HeaderGeneration)
}
