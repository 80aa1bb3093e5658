package restate

import (
	"strings"
	"testing"
)

func TestMatchModes(t *testing.T) {
	tests := []struct {
		text, phrase string
		m            matchMode
		want         bool
	}{
		{"unpaid invoices", "invoice", substring, true},
		{"unpaid invoices", "invoice", words, false},
		{"unpaid invoice.", "invoice", words, true},
		{"invoice", "invoice", words, true},
		{"_invoice_", "invoice", words, true},
		{"-compatible-x", "-compatible-", words, true}, // edges that are not letters need no boundary
		{"x-compatible-x", "-compatible-", words, true},
		{"ünicode", "nicode", words, false},
		{"日本invoice", "invoice", words, false}, // CJK letters are letters
		{"model gpt-3 was retired", "model…retired", words, true},
		{"models/x retired", "model…retired", words, false},
		{"models/x retired", "model…retired", substring, true},
		{"weekly quota exhausted", "weekly&&quota&&exhausted", words, true},
		{"weekly quotas exhausted", "weekly&&quota&&exhausted", words, false},
		{"reached your session usage limit", "reached your session…usage limit", words, true},
		{"reached your sessions… usage limits", "reached your session…usage limit", words, false},
		{"", "a", words, false},
		{"a", "", words, true},
	}
	for _, tt := range tests {
		if got := has(tt.text, tt.phrase, tt.m); got != tt.want {
			t.Errorf("has(%q, %q, words=%v) = %v, want %v", tt.text, tt.phrase, tt.m, got, tt.want)
		}
	}
}

func TestWordMatchingAllocatesNothing(t *testing.T) {
	st := defaultState()
	sig := &st.t.Signals
	text := lower(strings.Repeat("lorem ipsum dolor sit amet, ", 40) + "API access suspended until unpaid invoices are settled")
	allocs := testing.AllocsPerRun(100, func() {
		hasAny(text, sig.Ban, words)
		hasAny(text, sig.Credits, words)
		hasAny(text, sig.Weekly, words)
		hasAny(text, sig.Session, words)
		near(text, sig.Suspended, words, sig.BillingNear, words, suspensionWindow)
	})
	if allocs != 0 {
		t.Errorf("word matching allocates %v times per run", allocs)
	}
}
