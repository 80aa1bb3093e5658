package benchscale

import (
	"flag"
	"testing"
)

func TestSizesAskForAMillion(t *testing.T) {
	f := flag.Lookup("test.bench")
	old := f.Value.String()
	defer func() { _ = f.Value.Set(old) }()
	for _, c := range []struct {
		pattern string
		want    []Size
	}{
		{"", []Size{{"keys=1k", 1000}, {"keys=100k", 100_000}}},
		{"InsertAtCap", []Size{{"keys=1k", 1000}, {"keys=100k", 100_000}}},
		{"InsertAtCap/keys=1M", []Size{{"keys=1k", 1000}, {"keys=100k", 100_000}, {"keys=1M", 1_000_000}}},
	} {
		if err := f.Value.Set(c.pattern); err != nil {
			t.Fatal(err)
		}
		got := Sizes()
		if len(got) != len(c.want) {
			t.Fatalf("Sizes() with -bench %q = %v, want %v", c.pattern, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("Sizes() with -bench %q = %v, want %v", c.pattern, got, c.want)
			}
		}
	}
}
