package slack

import (
	"slices"
	"testing"
)

// A message's Seq sorts as Slack orders messages, whatever the digits.
func TestTsSeqSortsAsSlackDoes(t *testing.T) {
	in := []string{"1700000000.000200", "999999999.999999", "1700000000.000010", "1700000001.000001", "1700000000.1"}
	want := []string{"999999999.999999", "1700000000.000010", "1700000000.000200", "1700000000.1", "1700000001.000001"}
	byseq := slices.Clone(in)
	slices.SortFunc(byseq, func(a, b string) int {
		if tsSeq(a) < tsSeq(b) {
			return -1
		}
		if tsSeq(a) > tsSeq(b) {
			return 1
		}
		return 0
	})
	if !slices.Equal(byseq, want) {
		t.Errorf("sorted by Seq: %q, want %q", byseq, want)
	}
	for _, bad := range []string{"", "abc", "1.2.3", "12x.5"} {
		if s := tsSeq(bad); s != "" {
			t.Errorf("tsSeq(%q) = %q, want none", bad, s)
		}
	}
}
