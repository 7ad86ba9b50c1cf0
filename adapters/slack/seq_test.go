package slack

import (
	"fmt"
	"slices"
	"testing"

	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
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

// One channel's events go to one lane, whatever their kind, so they are
// recorded in the order Slack sent them; channels spread over the lanes.
func TestLaneOfKeepsAChannelTogether(t *testing.T) {
	event := func(inner any) socketmode.Event {
		return socketmode.Event{Type: socketmode.EventTypeEventsAPI, Data: slackevents.EventsAPIEvent{InnerEvent: slackevents.EventsAPIInnerEvent{Data: inner}}}
	}
	used := map[int]bool{}
	for i := range 200 {
		ch := fmt.Sprintf("C%04d", i)
		msg := laneOf(event(&slackevents.MessageEvent{Channel: ch, TimeStamp: "1.1"}), eventWorkers)
		mention := laneOf(event(&slackevents.AppMentionEvent{Channel: ch}), eventWorkers)
		if msg != mention {
			t.Fatalf("channel %s: a message goes to lane %d, a mention to %d", ch, msg, mention)
		}
		used[msg] = true
	}
	if len(used) < eventWorkers/2 {
		t.Errorf("200 channels use %d of %d lanes", len(used), eventWorkers)
	}
}
