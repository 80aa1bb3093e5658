package lease

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"strings"
)

const (
	// ownerPrefix starts every owner token.
	ownerPrefix = "vlo_"
	// ownerLen is the length of an owner token: the prefix and 43 base64url
	// characters (256 random bits).
	ownerLen = len(ownerPrefix) + 43

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
// [ParseOwner] for input from clients. It does not allocate for tokens of
// the owner length or shorter.
func HashOwner(token string) OwnerHash {
	if len(token) <= ownerLen {
		// A stack copy keeps the hot path free of allocation.
		var buf [ownerLen]byte
		n := copy(buf[:], token)
		return sha256.Sum256(buf[:n])
	}
	return sha256.Sum256([]byte(token))
}

// isZero reports whether h is the zero hash (no owner).
func (h OwnerHash) isZero() bool { return h == OwnerHash{} }

// equalHash reports whether h and o are the same digest. The comparison
// takes the same time wherever the digests differ.
func equalHash(h, o OwnerHash) bool {
	var v uint64
	for i := 0; i < len(h); i += 8 {
		v |= binary.LittleEndian.Uint64(h[i:]) ^ binary.LittleEndian.Uint64(o[i:])
	}
	// The low half of v|v>>32 is zero exactly when v is.
	return subtle.ConstantTimeEq(int32(uint32(v|v>>32)), 0) == 1
}

// String returns the digest as 64 lowercase hexadecimal characters.
func (h OwnerHash) String() string { return hex.EncodeToString(h[:]) }

// validOwner reports whether token, taken as it is (not trimmed), matches
// ^vlo_[A-Za-z0-9_-]{43}$.
func validOwner(token string) bool {
	if len(token) != ownerLen || !strings.HasPrefix(token, ownerPrefix) {
		return false
	}
	for i := len(ownerPrefix); i < len(token); i++ {
		c := token[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// ParseOwner trims surrounding white space from token, checks that it
// matches ^vlo_[A-Za-z0-9_-]{43}$ and returns its digest. An empty token
// gives [ErrContextRequired], a malformed one [ErrContextInvalid] (as an
// *[Error]). It does not allocate.
func ParseOwner(token string) (OwnerHash, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return OwnerHash{}, errContextRequired
	}
	if !validOwner(token) {
		return OwnerHash{}, errContextInvalid
	}
	return HashOwner(token), nil
}

// parseGeneration parses a generation as sent in [HeaderGeneration]: after
// trimming white space it must match ^[1-9][0-9]*$ and be at most
// [MaxGeneration]. Anything else gives ErrContextInvalid.
func parseGeneration(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 16 || s[0] == '0' {
		return 0, errContextInvalid
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, errContextInvalid
		}
		n = n*10 + uint64(c-'0')
	}
	if n > MaxGeneration {
		return 0, errContextInvalid
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

// parseOwnerHeader reads and validates [HeaderOwner] from h (canonical key).
// A missing or empty header gives ErrContextRequired; a malformed or
// repeated one ErrContextInvalid.
func parseOwnerHeader(h http.Header) (OwnerHash, error) {
	v, ok, multiple := single(h, HeaderOwner)
	switch {
	case multiple:
		return OwnerHash{}, errContextInvalid
	case !ok:
		return OwnerHash{}, errContextRequired
	}
	return ParseOwner(v)
}

// ParseHeader reads the lease context of a request: the owner from
// [HeaderOwner] and the generation from [HeaderGeneration] (canonical
// keys; each trimmed, each sent once). A missing owner gives
// [ErrContextRequired]; a malformed or repeated owner, or a missing,
// malformed or repeated generation gives [ErrContextInvalid] (as an
// *[Error]). The generation must match ^[1-9][0-9]*$ and be at most
// [MaxGeneration]. A request carries no lease at all when it has neither
// header: h[HeaderOwner] and h[HeaderGeneration] are both nil (a server's
// request headers are in canonical form). ParseHeader does not allocate.
func ParseHeader(h http.Header) (owner OwnerHash, generation uint64, err error) {
	owner, err = parseOwnerHeader(h)
	if err != nil {
		return OwnerHash{}, 0, err
	}
	v, ok, multiple := single(h, HeaderGeneration)
	if !ok || multiple {
		return OwnerHash{}, 0, errContextInvalid
	}
	generation, err = parseGeneration(v)
	if err != nil {
		return OwnerHash{}, 0, err
	}
	return owner, generation, nil
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
