package agent

import "time"

// AccessMode is who may talk to the bot on a platform.
type AccessMode string

const (
	// AccessOpen: anyone who can message the bot, except people of
	// another organisation (User.External) who are not allowed.
	AccessOpen AccessMode = "open"
	// AccessAllowlist: the users and chats allowed in the config or by
	// an admin; anyone else is told once that they are not.
	AccessAllowlist AccessMode = "allowlist"
	// AccessPairing: as allowlist, but a stranger gets a code that an
	// admin approves (a private chat pairs the person, a group the chat).
	AccessPairing AccessMode = "pairing"
)

// Access is one platform's access setting: a mode, and users and chats
// allowed whatever the mode (besides those admins stored).
type Access struct {
	Mode  AccessMode
	Users []string
	Chats []string
}

// Decision is a person's click on an approval's button.
type Decision struct {
	ApprovalID string
	Chat       SessionKey // where the click came from
	User       User
	Approve    bool
	Always     bool // approve and allow the tool in this channel from now on (admins)
}

// Decided is what a click did, for the platform to tell the person who
// clicked (a callback answer, an ephemeral message).
type Decided struct {
	Approval Approval
	Applied  bool   // this click decided it
	Notice   string // what to tell the person who clicked
}

// PolicyView describes a channel's tool policy: for the screens that show
// it and, when Editable, change it.
type PolicyView struct {
	Channel  SessionKey
	Version  int64
	Editable bool // the person it is for may change it
	Default  Reason
	Groups   []GroupView
}

// GroupView is one group of tools in a [PolicyView].
type GroupView struct {
	Name  string
	Rule  *Reason // the group's own rule, if one is set (here or in config)
	Tools []ToolView
}

// ToolView is one tool in a [PolicyView].
type ToolView struct {
	Name   string
	Reason Reason // its effective mode and why
}

// Budgets bound what a channel and a person may spend. Zero means no limit.
type Budgets struct {
	ChannelTokensPerDay   int64
	UserMessagesPerMinute int
}

// Approvals configure how long a question waits.
type Approvals struct {
	Timeout time.Duration // default 5m
}
