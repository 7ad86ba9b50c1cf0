package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrInvalid is wrapped by errors about malformed keys, messages and lease
// arguments.
var ErrInvalid = errors.New("invalid")

// SessionKey names one conversation. A channel is a session key with Thread
// cleared: policy and workspace belong to the channel, history to the session.
type SessionKey struct {
	Platform string // "slack", "telegram", "console"
	Team     string // Slack team ID; empty elsewhere
	Chat     string // channel, DM or chat ID
	Thread   string // Slack thread root ts, Telegram forum topic; empty for a flat chat
}

// Channel returns the key of the channel the session belongs to.
func (k SessionKey) Channel() SessionKey {
	k.Thread = ""
	return k
}

// IsChannel reports whether k names a whole channel rather than a thread in it.
func (k SessionKey) IsChannel() bool { return k.Thread == "" }

// Validate reports whether k can name a session.
func (k SessionKey) Validate() error {
	if k.Platform == "" || k.Chat == "" {
		return fmt.Errorf("%w session key: it needs a platform and a chat", ErrInvalid)
	}
	return nil
}

// ParseSessionKey is the inverse of [SessionKey.String].
func ParseSessionKey(s string) (SessionKey, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return SessionKey{}, fmt.Errorf("%w session key %q: want 4 parts, got %d", ErrInvalid, s, len(parts))
	}
	for i, p := range parts {
		u, err := unescapeKeyPart(p)
		if err != nil {
			return SessionKey{}, fmt.Errorf("%w session key %q: %v", ErrInvalid, s, err)
		}
		parts[i] = u
	}
	k := SessionKey{Platform: parts[0], Team: parts[1], Chat: parts[2], Thread: parts[3]}
	return k, k.Validate()
}

func unescapeKeyPart(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(s[i:], "%3A"):
			b.WriteByte(':')
		default:
			return "", fmt.Errorf("bad escape at %d", i)
		}
		i += 2
	}
	return b.String(), nil
}

// String returns a readable, unambiguous form for logs and store keys:
// components joined by ':' with '%' and ':' escaped inside them.
func (k SessionKey) String() string {
	var b strings.Builder
	b.Grow(len(k.Platform) + len(k.Team) + len(k.Chat) + len(k.Thread) + 3)
	for i, part := range [...]string{k.Platform, k.Team, k.Chat, k.Thread} {
		if i > 0 {
			b.WriteByte(':')
		}
		escapeKeyPart(&b, part)
	}
	return b.String()
}

func escapeKeyPart(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b.WriteString("%25")
		case ':':
			b.WriteString("%3A")
		default:
			b.WriteByte(c)
		}
	}
}

// User is the author of an incoming message.
type User struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// External marks a person from another organisation than the one the
	// bot is installed in (a Slack shared channel), or one whose
	// organisation is not known: an open bot refuses them unless they or
	// the channel are allowed, and an admin's ID from them is not the
	// admin.
	External bool `json:"external,omitempty"`
	// Guest marks a guest of the bot's own organisation (Slack's single-
	// and multi-channel guests): an open bot refuses them unless they or
	// the channel are allowed, as it does people from outside.
	Guest bool `json:"guest,omitempty"`
	// Team is the organisation the person belongs to where the platform
	// says (a Slack team ID). Whether it is the bot's own is External.
	Team string `json:"team,omitempty"`
}

// Display is how u is named to people: their name, else their ID, else
// "someone".
func (u User) Display() string {
	switch {
	case u.Name != "":
		return u.Name
	case u.ID != "":
		return u.ID
	}
	return "someone"
}

// File is a file that came with a message. The platform's [Downloader]
// saves it into the channel's workspace when the turn starts (not before
// Submit: the platform is acknowledged first, and downloads take time).
type File struct {
	ID    string `json:"id,omitempty"`  // the platform's file ID
	Name  string `json:"name"`          // as the person named it
	URL   string `json:"url,omitempty"` // where the Downloader fetches it
	MIME  string `json:"mime,omitempty"`
	Size  int64  `json:"size,omitempty"`
	Path  string `json:"path,omitempty"`  // workspace-relative, once downloaded
	Error string `json:"error,omitempty"` // why it could not be downloaded
}

// Inbound is one incoming message, free of any platform type.
type Inbound struct {
	Key       SessionKey `json:"key"`
	MessageID string     `json:"id"` // unique within the chat; the dedup key
	User      User       `json:"user"`
	Text      string     `json:"text"` // the bot's mention removed
	Files     []File     `json:"files,omitempty"`
	Addressed bool       `json:"addressed,omitempty"` // DM, mention, reply to the bot
	// Private marks a conversation between the bot and this one person (a
	// Slack DM, a Telegram private chat): access pairs the person, not the
	// chat.
	Private bool `json:"private,omitempty"`
	// ChatName is the chat's title where the platform gives one, for
	// admins deciding on access.
	ChatName string `json:"chat_name,omitempty"`
	// FollowUp marks a reply inside a thread without a mention: it is for
	// the bot if the bot already takes part in that session (the
	// dispatcher checks the store).
	FollowUp bool      `json:"follow_up,omitempty"`
	Time     time.Time `json:"time"`
	// Seq is the message's place in its chat in the platform's order, a
	// string that sorts as the platform's order does (a Slack ts, a
	// Telegram message_id, zero-padded to a fixed width by the adapter);
	// the mailbox keeps that order. Empty: arrival order.
	Seq string `json:"seq,omitempty"`
	// ReplyTo is an adapter-defined reference the Thread uses to answer
	// (for example the Telegram message ID to reply to). Opaque to agent.
	ReplyTo string `json:"reply_to,omitempty"`
	// Approval, on an entry the Dispatcher makes itself, names a decided
	// approval: the entry resumes the turn that asked, with its decision.
	Approval string `json:"approval,omitempty"`
}

// Validate reports whether in can be recorded: a valid key and an ID.
func (in *Inbound) Validate() error {
	if err := in.Key.Validate(); err != nil {
		return err
	}
	if in.MessageID == "" {
		return fmt.Errorf("%w message: it has no ID", ErrInvalid)
	}
	return nil
}
