package govern

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// AccessMode is who may talk to the bot on a platform.
type AccessMode string

const (
	// AccessOpen: anyone who can message the bot, except people of
	// another organisation (User.External) and guests (User.Guest) who
	// are not allowed.
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

// refusalWindow is how long a refused person is not told again.
const refusalWindow = 24 * time.Hour

// AuditUser names a user in the audit log: "slack:U0123", unambiguous across
// platforms, as the command line's "cli:NAME" is.
func AuditUser(platform, id string) string {
	if id == "" {
		return ""
	}
	return platform + ":" + id
}

// auditUsers names several people, each once, in order.
func auditUsers(platform string, us []agent.User) string {
	var names []string
	for _, u := range us {
		if n := AuditUser(platform, u.ID); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// globalAdmin reports whether u is one of the bot's admins (the config).
// An ID names a person of the organisation the bot is installed in: the
// same ID from another organisation (a Slack workspace whose IDs are its
// own), or from a person whose organisation is not known, is not them.
func (g *Gate) globalAdmin(platform string, u agent.User) bool {
	return u.ID != "" && !u.External && g.cfg.Admins != nil && g.cfg.Admins(platform, u)
}

// Admin reports whether u may administer chat: a bot admin, or one of the
// platform's own admins for that chat when the platform says so and the
// chat is itself admitted (allowed in the config, by an admin, or open to
// all): a chat anyone can make, such as a Telegram group, makes its
// creator an admin of nothing.
func (g *Gate) Admin(ctx context.Context, chat agent.SessionKey, u agent.User) bool {
	if g.globalAdmin(chat.Platform, u) {
		return true
	}
	ac, ok := g.cfg.Platforms[chat.Platform].(agent.AdminChecker)
	if !ok || u.ID == "" || u.External || u.Guest {
		return false
	}
	if admitted, err := g.chatAdmitted(ctx, chat); err != nil || !admitted {
		if err != nil {
			g.log.Warn("check whether the chat is admitted", "chat", chat.Channel().String(), "err", err)
		}
		return false
	}
	ok, err := ac.IsAdmin(ctx, chat.Channel(), u.ID)
	if err != nil {
		g.log.Warn("check platform admin", "chat", chat.Channel().String(), "user", u.ID, "err", err)
		return false
	}
	return ok
}

// chatAdmitted reports whether chat itself may talk to the bot, whoever
// writes in it: its platform is open, or the chat is allowed.
func (g *Gate) chatAdmitted(ctx context.Context, chat agent.SessionKey) (bool, error) {
	acc, ok := g.cfg.Access[chat.Platform]
	if !ok || acc.Mode == AccessOpen || slices.Contains(acc.Chats, chat.Chat) {
		return true, nil
	}
	return g.cfg.Store.Allowed(ctx, chat.Platform, GrantChat, chat.Chat)
}

// Admitted reports whether u may talk to the bot in chat now, as Receive
// decides it, but telling nobody: what runs on someone's behalf later (a
// job, a schedule, an approval) asks it again.
func (g *Gate) Admitted(ctx context.Context, chat agent.SessionKey, u agent.User, private bool) (bool, error) {
	acc, ok := g.cfg.Access[chat.Platform]
	if !ok {
		return true, nil // a platform without rules: the terminal
	}
	if g.globalAdmin(chat.Platform, u) || (u.ID != "" && slices.Contains(acc.Users, u.ID)) || slices.Contains(acc.Chats, chat.Chat) {
		return true, nil
	}
	if acc.Mode == AccessOpen && !u.External && !u.Guest {
		return true, nil
	}
	if u.ID != "" {
		if ok, err := g.cfg.Store.Allowed(ctx, chat.Platform, GrantUser, u.ID); err != nil || ok {
			return ok, err
		}
	}
	if !private {
		return g.cfg.Store.Allowed(ctx, chat.Platform, GrantChat, chat.Chat)
	}
	return false, nil
}

// Admit implements [agent.Gate]: whether in's author may talk to the bot
// there. A refused person is told once (a pairing code, or who to ask);
// nothing else of theirs is stored.
func (g *Gate) Admit(ctx context.Context, in agent.Inbound) (agent.Admission, error) {
	if ok, err := g.Admitted(ctx, in.Key, in.User, in.Private); err != nil || ok {
		return agent.Admission{OK: ok}, err
	}
	acc := g.cfg.Access[in.Key.Platform]
	if acc.Mode == AccessPairing {
		return g.pair(ctx, in)
	}
	first, err := g.cfg.Store.Once(ctx, "refused:"+in.Key.Platform+":"+in.User.ID+":"+in.Key.Chat, refusalWindow)
	if err != nil || !first {
		return agent.Admission{}, err
	}
	g.audit(ctx, AuditEntry{Action: AuditAccessRefused, Platform: in.Key.Platform, Channel: in.Key.Channel().String(), User: AuditUser(in.Key.Platform, in.User.ID),
		Outcome: "told", Detail: string(acc.Mode)})
	what := "you"
	switch {
	case in.User.External:
		what = "people from outside this workspace"
	case in.User.Guest:
		what = "guests of this workspace"
	}
	return agent.Admission{Tell: fmt.Sprintf("Sorry, I only answer people an admin has allowed, and %s are not on the list yet. "+
		"An admin can allow you with: firstmate admin access allow %s user %s", what, in.Key.Platform, in.User.ID)}, nil
}

// Receive implements [agent.Gate]: Admit, then the person's message rate.
func (g *Gate) Receive(ctx context.Context, in agent.Inbound) (agent.Admission, error) {
	a, err := g.Admit(ctx, in)
	if err != nil || !a.OK {
		return a, err
	}
	return g.rate(ctx, in)
}

// pair gives a stranger a code for an admin to approve: for the person in
// a private chat, for the whole chat in a group. Only a new request is told.
func (g *Gate) pair(ctx context.Context, in agent.Inbound) (agent.Admission, error) {
	p := Pairing{Code: NewCode(), Platform: in.Key.Platform, Kind: GrantUser, ID: in.User.ID, Name: in.User.Name,
		Chat: in.Key.Channel(), Created: time.Now().UTC()}
	if !in.Private {
		p.Kind, p.ID, p.Name = GrantChat, in.Key.Chat, in.ChatName
	}
	p.Expires = p.Created.Add(g.cfg.PairingTTL)
	stored, created, err := g.cfg.Store.Pair(ctx, p)
	if err != nil || !created {
		return agent.Admission{}, err
	}
	g.audit(ctx, AuditEntry{Action: AuditPairRequest, Platform: p.Platform, Channel: p.Chat.String(), User: AuditUser(in.Key.Platform, in.User.ID),
		Outcome: "told", Detail: string(p.Kind) + " " + p.ID + nameSuffix(p.Name)})
	who := "you"
	if p.Kind == GrantChat {
		who = "this chat"
	}
	return agent.Admission{Tell: fmt.Sprintf("Hello! I do not know %s yet. To talk to me, ask an admin to approve this code: %s "+
		"(valid for %s). They can send me the code, or run: firstmate admin pair approve %s",
		who, stored.Code, g.cfg.PairingTTL.Round(time.Minute), stored.Code)}, nil
}

// rate drops in when its author sent more messages this minute than a
// person may; they are told once a minute. A platform's re-delivery of a
// message is not another message.
func (g *Gate) rate(ctx context.Context, in agent.Inbound) (agent.Admission, error) {
	limit := g.cfg.Budgets.UserMessagesPerMinute
	if limit <= 0 || in.User.ID == "" || g.globalAdmin(in.Key.Platform, in.User) {
		return agent.Admission{OK: true}, nil
	}
	c, err := g.cfg.Store.CountMessage(ctx, in.Key.Platform+":"+in.User.ID, in.Key.Channel().String()+":"+in.MessageID,
		int64(limit), time.Minute, 10*time.Minute)
	if err != nil {
		return agent.Admission{}, err
	}
	if !c.First || c.N <= int64(limit) {
		return agent.Admission{OK: true}, nil
	}
	if !c.Tell {
		return agent.Admission{}, nil
	}
	g.audit(ctx, AuditEntry{Action: AuditBudget, Platform: in.Key.Platform, Channel: in.Key.Channel().String(), User: AuditUser(in.Key.Platform, in.User.ID),
		Outcome: "messages", Detail: fmt.Sprintf("more than %d messages a minute", limit)})
	return agent.Admission{Tell: fmt.Sprintf("You are sending messages faster than I take them here (%d a minute), so I skipped the last ones. Wait a minute and send again.", limit)}, nil
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// codeAlphabet has no letters that read like digits (no I, L, O, U).
const codeAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewCode returns a pairing code like "K7QP-M2XD": 40 random bits, easy to
// read aloud and type.
func NewCode() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	out := make([]byte, 0, 9)
	for i, c := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, codeAlphabet[int(c)%len(codeAlphabet)])
	}
	return string(out)
}
