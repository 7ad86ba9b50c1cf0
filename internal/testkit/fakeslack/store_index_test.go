package fakeslack

import "testing"

// A message stored again under the same channel and ts replaces the
// earlier one in its channel's thread too, and channels do not mix.
func TestThreadIndex(t *testing.T) {
	s := New(t)
	parent := s.AddMessage(Message{Channel: General, User: Alice, Text: "parent"})
	s.AddMessage(Message{Channel: General, User: Bob, ThreadTS: parent.TS, Text: "first"})
	reply := s.AddMessage(Message{Channel: General, User: Bob, ThreadTS: parent.TS, Text: "second"})
	s.AddMessage(Message{Channel: "C0OTHER", User: Bob, TS: reply.TS, ThreadTS: parent.TS, Text: "elsewhere"})
	s.AddMessage(Message{Channel: General, User: Bob, TS: reply.TS, ThreadTS: parent.TS, Text: "second, again"})

	thread := s.Thread(General, parent.TS)
	var texts []string
	for _, m := range thread {
		texts = append(texts, m.Text)
	}
	if len(texts) != 3 || texts[0] != "parent" || texts[1] != "first" || texts[2] != "second, again" {
		t.Errorf("thread %q, want parent, first, second again", texts)
	}
	if got := s.Messages("C0OTHER"); len(got) != 1 || got[0].Text != "elsewhere" {
		t.Errorf("C0OTHER holds %+v", got)
	}
	if got := s.Messages(General); len(got) != 3 {
		t.Errorf("#general holds %d messages, want 3", len(got))
	}
}
