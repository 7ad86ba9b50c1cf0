package agent

// MessageIDForTest is the message ID a firing of s posts.
func MessageIDForTest(s Schedule) string { return s.messageID() }
