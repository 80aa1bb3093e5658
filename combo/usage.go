package combo

import (
	"bytes"

	"github.com/routeguard/routeguard/internal/jsonscan"
)

// Usage is the token usage an answer reported, as the router parsed it
// from a plain answer's body or a stream's events up to its commit. A zero
// count means the answer reported none.
//
// The router reads the usage objects of OpenAI's Chat Completions
// (prompt_tokens, completion_tokens, in the body or a chunk), of its
// Responses API (input_tokens, output_tokens, in the body or under the
// response of a response.completed event) and of Anthropic's Messages
// API (input_tokens, output_tokens, in the body, under the message of a
// message_start event or in a message_delta event, the later count
// winning). Input tokens are the count the answer gives, without the
// cached ones Anthropic reports apart. A count must be a whole number of
// at most nine digits to be read; the counts are 32 bits wide to keep an
// Attempt small.
type Usage struct {
	InputTokens, OutputTokens int32
}

var usageWord = []byte(`usage`)

// bodyUsage reads the usage of a plain answer's whole body: a JSON object
// with a usage member (see [Usage]). A body without the word "usage" costs
// one byte search.
func bodyUsage(body []byte) Usage {
	if !bytes.Contains(body, usageWord) {
		return Usage{}
	}
	var u Usage
	u.merge(eventUsage(body))
	return u
}

// streamUsage reads the usage an event stream's held prefix reported: the
// usage of each data line's JSON object, merged in order. A prefix without
// the word "usage" costs one byte search; a line without it, one more.
func streamUsage(held []byte) Usage {
	if !bytes.Contains(held, usageWord) {
		return Usage{}
	}
	var u Usage
	for len(held) > 0 {
		line := held
		if i := bytes.IndexByte(held, '\n'); i >= 0 {
			line, held = held[:i], held[i+1:]
		} else {
			held = nil
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok || !bytes.Contains(data, usageWord) {
			continue
		}
		u.merge(eventUsage(bytes.TrimSuffix(data, []byte("\r"))))
	}
	return u
}

// merge keeps the counts of v that were reported.
func (u *Usage) merge(v Usage) {
	if v.InputTokens > 0 {
		u.InputTokens = v.InputTokens
	}
	if v.OutputTokens > 0 {
		u.OutputTokens = v.OutputTokens
	}
}

// eventUsage reads the usage of one JSON document: its usage member, or
// that of its message (Anthropic's message_start) or response (the
// Responses API's events).
func eventUsage(doc []byte) Usage {
	if !jsonscan.Valid(doc) {
		return Usage{}
	}
	i := jsonscan.Space(doc, 0)
	obj := doc[i:]
	if obj[0] != '{' {
		return Usage{}
	}
	if v := jsonscan.Lookup(obj, "usage"); v != nil {
		return usageObject(v)
	}
	for _, inner := range [...]string{"message", "response"} {
		if v := jsonscan.Lookup(jsonscan.Lookup(obj, inner), "usage"); v != nil {
			return usageObject(v)
		}
	}
	return Usage{}
}

// usageObject reads the token counts of a usage object.
func usageObject(obj []byte) Usage {
	var u Usage
	if len(obj) == 0 || obj[0] != '{' {
		return u
	}
	for i := 1; ; {
		ks, ke, vs, ve, ok := jsonscan.Member(obj, i)
		if !ok {
			return u
		}
		i = ve
		key, val := obj[ks:ke], obj[vs:ve]
		switch {
		case jsonscan.KeyIs(key, "prompt_tokens"), jsonscan.KeyIs(key, "input_tokens"):
			u.InputTokens = tokenCount(val)
		case jsonscan.KeyIs(key, "completion_tokens"), jsonscan.KeyIs(key, "output_tokens"):
			u.OutputTokens = tokenCount(val)
		}
	}
}

// tokenCount is the value of a JSON number that is a whole count of at
// most nine digits (a fraction of zeros allowed, as in 12.0); 0 for
// anything else.
func tokenCount(v []byte) int32 {
	n := int32(0)
	i := 0
	for ; i < len(v) && '0' <= v[i] && v[i] <= '9'; i++ {
		if i == 9 {
			return 0
		}
		n = n*10 + int32(v[i]-'0')
	}
	if i == 0 {
		return 0
	}
	if i < len(v) && v[i] == '.' {
		for i++; i < len(v) && v[i] == '0'; i++ {
		}
	}
	if i != len(v) {
		return 0 // a fraction, an exponent, a sign: not a count
	}
	return n
}
