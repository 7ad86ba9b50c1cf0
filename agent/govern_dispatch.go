package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// The dispatcher's half of admins' rules: who may talk to the bot (checked
// in Submit before anything is stored), the policy of each turn, approvals
// that hold no worker while they wait, budgets and the audit log.

// globalAdmin reports whether u is one of the bot's admins (the config).
func (d *Dispatcher) globalAdmin(platform string, u User) bool {
	return u.ID != "" && d.cfg.Admins != nil && d.cfg.Admins(platform, u.ID)
}

// adminHere reports whether u may administer chat: a bot admin, or one of
// the platform's own admins for that chat when the platform says so.
func (d *Dispatcher) adminHere(ctx context.Context, chat SessionKey, u User) bool {
	if d.globalAdmin(chat.Platform, u) {
		return true
	}
	ac, ok := d.cfg.Platforms[chat.Platform].(AdminChecker)
	if !ok || u.ID == "" {
		return false
	}
	ok, err := ac.IsAdmin(ctx, chat.Channel(), u.ID)
	if err != nil {
		d.log.Warn("check platform admin", "chat", chat.Channel().String(), "user", u.ID, "err", err)
		return false
	}
	return ok
}

// Admit implements [Submitter].
func (d *Dispatcher) Admit(ctx context.Context, in Inbound) (bool, error) {
	if err := in.Validate(); err != nil {
		return false, err
	}
	return d.admit(ctx, in)
}

// auditUser names a user in the audit log: "slack:U0123", unambiguous across
// platforms, as the command line's "cli:NAME" is.
func auditUser(platform, id string) string {
	if id == "" {
		return ""
	}
	return platform + ":" + id
}

// refusalWindow is how long a refused person is not told again.
const refusalWindow = 24 * time.Hour

// admit reports whether in's author may talk to the bot here. A refused
// person is told once (a pairing code, or who to ask); nothing else of
// theirs is stored.
func (d *Dispatcher) admit(ctx context.Context, in Inbound) (bool, error) {
	acc, ok := d.cfg.Access[in.Key.Platform]
	if !ok {
		return true, nil // a platform without rules: the terminal
	}
	if d.globalAdmin(in.Key.Platform, in.User) || slices.Contains(acc.Users, in.User.ID) || slices.Contains(acc.Chats, in.Key.Chat) {
		return true, nil
	}
	if acc.Mode == AccessOpen && !in.User.External {
		return true, nil
	}
	if in.User.ID != "" {
		if ok, err := d.cfg.Store.Allowed(ctx, in.Key.Platform, GrantUser, in.User.ID); err != nil || ok {
			return ok, err
		}
	}
	if !in.Private {
		if ok, err := d.cfg.Store.Allowed(ctx, in.Key.Platform, GrantChat, in.Key.Chat); err != nil || ok {
			return ok, err
		}
	}
	if acc.Mode == AccessPairing {
		return false, d.pair(ctx, in)
	}
	first, err := d.cfg.Store.Once(ctx, "refused:"+in.Key.Platform+":"+in.User.ID+":"+in.Key.Chat, refusalWindow)
	if err != nil || !first {
		return false, err
	}
	d.audit(ctx, AuditEntry{Action: AuditAccessRefused, Platform: in.Key.Platform, Channel: in.Key.Channel().String(), User: auditUser(in.Key.Platform, in.User.ID),
		Outcome: "told", Detail: string(acc.Mode)})
	what := "you"
	if in.User.External {
		what = "people from outside this workspace"
	}
	d.reply(ctx, in, Notice{Text: fmt.Sprintf("Sorry, I only answer people an admin has allowed, and %s are not on the list yet. "+
		"An admin can allow you with: firstmate admin access allow %s user %s", what, in.Key.Platform, in.User.ID)})
	return false, nil
}

// pair gives a stranger a code for an admin to approve: for the person in
// a private chat, for the whole chat in a group. Only a new request is told.
func (d *Dispatcher) pair(ctx context.Context, in Inbound) error {
	p := Pairing{Code: NewCode(), Platform: in.Key.Platform, Kind: GrantUser, ID: in.User.ID, Name: in.User.Name,
		Chat: in.Key.Channel(), Created: time.Now().UTC()}
	if !in.Private {
		p.Kind, p.ID, p.Name = GrantChat, in.Key.Chat, in.ChatName
	}
	p.Expires = p.Created.Add(d.cfg.PairingTTL)
	stored, created, err := d.cfg.Store.Pair(ctx, p)
	if err != nil || !created {
		return err
	}
	d.audit(ctx, AuditEntry{Action: AuditPairRequest, Platform: p.Platform, Channel: p.Chat.String(), User: auditUser(in.Key.Platform, in.User.ID),
		Outcome: "told", Detail: string(p.Kind) + " " + p.ID + nameSuffix(p.Name)})
	who := "you"
	if p.Kind == GrantChat {
		who = "this chat"
	}
	d.reply(ctx, in, Notice{Text: fmt.Sprintf("Hello! I do not know %s yet. To talk to me, ask an admin to approve this code: %s "+
		"(valid for %s). They can send me the code, or run: firstmate admin pair approve %s",
		who, stored.Code, d.cfg.PairingTTL.Round(time.Minute), stored.Code)})
	return nil
}

// approvePairing is an admin sending a pairing code to the bot.
func (d *Dispatcher) approvePairing(ctx context.Context, in Inbound, code string) (string, error) {
	if !d.globalAdmin(in.Key.Platform, in.User) {
		return "Only an admin can approve a pairing code.", nil
	}
	p, err := ApprovePairing(ctx, d.cfg.Store, code, in.Key.Platform+":"+in.User.ID)
	if errors.Is(err, ErrNotFound) {
		return "That code is unknown or expired. Codes last " + d.cfg.PairingTTL.Round(time.Minute).String() + "; the person gets a new one when they write again.", nil
	}
	if err != nil {
		return "", fmt.Errorf("approve pairing: %w", err)
	}
	what := "user " + p.ID
	if p.Kind == GrantChat {
		what = "chat " + p.ID
	}
	return fmt.Sprintf("Approved: %s%s may talk to me now.", what, nameSuffix(p.Name)), nil
}

// overRate reports whether in's author sent more messages this minute than
// a person may; they are told once a minute, and the message is dropped.
func (d *Dispatcher) overRate(ctx context.Context, in Inbound) (bool, error) {
	limit := d.cfg.Budgets.UserMessagesPerMinute
	if limit <= 0 || in.User.ID == "" || d.globalAdmin(in.Key.Platform, in.User) {
		return false, nil
	}
	who := in.Key.Platform + ":" + in.User.ID
	// A platform's re-delivery of a message is not another message.
	if first, err := d.cfg.Store.Once(ctx, "counted:"+in.Key.Channel().String()+":"+in.MessageID, 10*time.Minute); err != nil || !first {
		return false, err
	}
	n, err := d.cfg.Store.Hit(ctx, "msgs:"+who, time.Minute)
	if err != nil || n <= int64(limit) {
		return false, err
	}
	if first, err := d.cfg.Store.Once(ctx, "rate-told:"+who, time.Minute); err != nil || !first {
		return true, err
	}
	d.audit(ctx, AuditEntry{Action: AuditBudget, Platform: in.Key.Platform, Channel: in.Key.Channel().String(), User: auditUser(in.Key.Platform, in.User.ID),
		Outcome: "messages", Detail: fmt.Sprintf("more than %d messages a minute", limit)})
	d.reply(ctx, in, Notice{Text: fmt.Sprintf("You are sending messages faster than I take them here (%d a minute), so I skipped the last ones. Wait a minute and send again.", limit)})
	return true, nil
}

// BudgetError ends a turn whose channel spent its tokens for the day.
type BudgetError struct {
	Used, Limit int64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("channel token budget spent: %d of %d tokens today", e.Used, e.Limit)
}

func today() string { return time.Now().UTC().Format(time.DateOnly) }

// budget checks the channel's tokens before each model call of a turn and
// counts them. A call's tokens are added to the count just before the next
// call, whose check gets the new total from the add; the last call's go
// with the turn's commit (Outbound.Spent). So the count is read once a
// turn, at its first check, and there is one round trip for each call
// after the first, none for the first. The total is as fresh as a read
// would be save for other turns' calls in the meantime (a day's budget is
// checked before a call, so one call past it is the most any turn adds).
type budget struct {
	d         *Dispatcher
	ch        SessionKey
	requester User
	log       *slog.Logger

	mu      sync.Mutex
	day     string // the day of used; "" when it must be read
	used    int64
	pending Spent // counted by no store yet
}

func (d *Dispatcher) newBudget(key SessionKey, requester User, log *slog.Logger) *budget {
	return &budget{d: d, ch: key.Channel(), requester: requester, log: log}
}

// before adds what the last call spent and checks the budget.
func (b *budget) before(ctx context.Context) error {
	limit := b.d.cfg.Budgets.ChannelTokensPerDay
	if limit <= 0 {
		return nil // nothing to check: the commit counts it all
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked(ctx)
	if day := today(); b.day != day {
		used, err := b.d.cfg.Store.Usage(ctx, b.ch, day)
		if err != nil {
			b.log.Warn("read channel usage; not enforcing the budget for this call", "err", err)
			return nil
		}
		b.day, b.used = day, used
	}
	if b.used >= limit {
		b.d.audit(ctx, AuditEntry{Action: AuditBudget, Platform: b.ch.Platform, Channel: b.ch.String(), User: auditUser(b.ch.Platform, b.requester.ID),
			Outcome: "tokens", Detail: fmt.Sprintf("%d of %d tokens today", b.used, limit)})
		return &BudgetError{Used: b.used, Limit: limit}
	}
	return nil
}

// after keeps what a call spent for the next check or the commit.
func (b *budget) after(ctx context.Context, u Usage, took time.Duration, err error) {
	if b.d.cfg.Observer != nil {
		b.d.cfg.Observer.ModelCall(took, u, err)
	}
	n := int64(u.PromptTokens + u.CompletionTokens)
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if day := today(); b.pending.Day != day {
		b.flushLocked(ctx) // the day turned: the old day's tokens are its own
		b.pending.Day = day
	}
	b.pending.Tokens += n
}

// spent hands over what no store counts yet, for the commit.
func (b *budget) spent() Spent {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.pending
	b.pending = Spent{}
	return s
}

// flush counts what is pending now, and unspent (what spent handed to a
// commit that failed): for a turn that ends without a commit.
func (b *budget) flush(ctx context.Context, unspent Spent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if unspent.Tokens > 0 {
		if b.pending.Tokens > 0 && b.pending.Day != unspent.Day {
			b.flushLocked(ctx)
		}
		b.pending.Day = unspent.Day
		b.pending.Tokens += unspent.Tokens
	}
	b.flushLocked(ctx)
}

func (b *budget) flushLocked(ctx context.Context) {
	p := b.pending
	if p.Tokens <= 0 {
		return
	}
	total, err := b.d.cfg.Store.AddUsage(context.WithoutCancel(ctx), b.ch, p.Day, p.Tokens)
	if err != nil {
		// Kept for the next add or the commit; the count is read again.
		b.log.Warn("count channel usage", "err", err)
		b.day = ""
		return
	}
	b.pending = Spent{}
	b.day, b.used = p.Day, total
}

// toolAudit writes each tool call to the audit log.
func (d *Dispatcher) toolAudit(key SessionKey, requester User) func(context.Context, ToolCall, string, string, time.Duration) {
	ch := key.Channel()
	return func(ctx context.Context, call ToolCall, args, outcome string, took time.Duration) {
		if d.cfg.Observer != nil {
			d.cfg.Observer.ToolCall(call.Name, outcome, took)
		}
		d.audit(ctx, AuditEntry{Action: AuditToolCall, Platform: ch.Platform, Channel: ch.String(), User: auditUser(ch.Platform, requester.ID),
			Tool: call.Name, Args: shorten(args, 200), Outcome: outcome, Duration: took})
	}
}

// audit writes e; a failure is logged, not returned: what was done stands.
func (d *Dispatcher) audit(ctx context.Context, e AuditEntry) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := d.cfg.Store.Audit(actx, e); err != nil {
		d.log.Warn("audit log write failed", "action", e.Action, "err", err)
	}
}

// shorten cuts s to about n bytes on a rune boundary.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// policy resolves a channel's policy from the config and the store.
func (d *Dispatcher) policy(ctx context.Context, chat SessionKey) (*Policy, error) {
	s, err := d.cfg.Store.Settings(ctx, chat.Channel())
	if err != nil {
		return nil, fmt.Errorf("read channel policy: %w", err)
	}
	return NewPolicy(chat, d.cfg.Policy, s), nil
}

func (d *Dispatcher) knownTools() []string {
	if d.cfg.Tools == nil {
		return nil
	}
	return d.cfg.Tools.Now().Known() // in Submit: never waits for MCP servers still starting
}

// Policy implements [Submitter].
func (d *Dispatcher) Policy(ctx context.Context, chat SessionKey, u User) (PolicyView, error) {
	p, err := d.policy(ctx, chat)
	if err != nil {
		return PolicyView{}, err
	}
	return p.View(d.knownTools(), d.channelSkills(ctx, chat), d.adminHere(ctx, chat, u)), nil
}

// SetPolicy implements [Submitter].
func (d *Dispatcher) SetPolicy(ctx context.Context, chat SessionKey, u User, change PolicyChange) (PolicyView, error) {
	if !d.adminHere(ctx, chat, u) {
		d.audit(ctx, AuditEntry{Action: AuditPolicyRefused, Platform: chat.Platform, Channel: chat.Channel().String(), User: auditUser(chat.Platform, u.ID),
			Outcome: "not an admin", Detail: change.String()})
		return PolicyView{}, ErrNotAdmin
	}
	_, err := ChangePolicy(ctx, d.cfg.Store, chat, chat.Platform+":"+u.ID, change, d.knownTools())
	if err != nil {
		return PolicyView{}, err
	}
	return d.Policy(ctx, chat, u)
}

// newApprovalID is short enough for Telegram's 64-byte callback data.
func newApprovalID() string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// approvalPoll is how often a waiting turn looks in the store for a
// decision another replica received.
const approvalPoll = time.Second

// approver asks people about ask-mode calls of one turn.
func (d *Dispatcher) approver(key SessionKey, th Thread, requester User, log *slog.Logger) func(context.Context, ApprovalNeeded) (bool, string) {
	return func(ctx context.Context, req ApprovalNeeded) (bool, string) {
		now := time.Now().UTC()
		a := Approval{ID: newApprovalID(), Key: key, CallID: req.CallID, Tool: req.Name, Args: shorten(string(req.Args), 300),
			Requester: requester, Asked: now, Deadline: now.Add(d.cfg.ApprovalTimeout), State: ApprovalPending}
		if err := d.cfg.Store.PutApproval(ctx, a); err != nil {
			log.Error("record approval", "err", err)
			return false, fmt.Sprintf("%s needs approval, and the request could not be recorded; do not retry it now", req.Name)
		}
		d.audit(ctx, AuditEntry{Action: AuditApprovalAsked, Platform: key.Platform, Channel: key.Channel().String(), User: auditUser(key.Platform, requester.ID),
			Tool: req.Name, Args: a.Args, Outcome: "pending", Detail: a.ID})
		wake := d.waitFor(a.ID)
		defer d.stopWaiting(a.ID)
		req.ID, req.Requester, req.Deadline = a.ID, requester, a.Deadline
		emit(ctx, th, req, log)

		// A person may take minutes: this turn's worker serves others.
		d.park()
		final := d.awaitDecision(ctx, a, wake, log)
		d.unpark()

		emit(context.WithoutCancel(ctx), th, ApprovalDecided{ID: a.ID, CallID: req.CallID, Name: req.Name, Approval: final}, log)
		switch final.State {
		case ApprovalApproved:
			return true, ""
		case ApprovalDenied:
			return false, fmt.Sprintf("%s was denied by %s; do not retry it, ask how to proceed", req.Name, who(final.DecidedBy))
		}
		if ctx.Err() != nil {
			return false, fmt.Sprintf("%s was not run: the turn ended while waiting for approval", req.Name)
		}
		return false, fmt.Sprintf("%s was not approved within %s, so it did not run; ask the person whether to try again", req.Name, d.cfg.ApprovalTimeout)
	}
}

func who(u User) string {
	if u.Name != "" {
		return u.Name
	}
	if u.ID != "" {
		return u.ID
	}
	return "someone"
}

// awaitDecision waits for a's decision: from this process (wake), from the
// store (a click another replica received), or the deadline, which denies.
func (d *Dispatcher) awaitDecision(ctx context.Context, a Approval, wake <-chan struct{}, log *slog.Logger) Approval {
	deadline := time.NewTimer(time.Until(a.Deadline))
	defer deadline.Stop()
	poll := time.NewTicker(approvalPoll)
	defer poll.Stop()
	bg := context.WithoutCancel(ctx)
	expire := func(reason string) Approval {
		final, decided, err := d.cfg.Store.DecideApproval(bg, a.ID, ApprovalDecision{State: ApprovalExpired, At: time.Now().UTC()})
		if err != nil {
			log.Warn("expire approval", "err", err)
			a.State = ApprovalExpired
			return a
		}
		if decided {
			d.audit(bg, AuditEntry{Action: AuditApprovalDecided, Platform: a.Key.Platform, Channel: a.Key.Channel().String(),
				Tool: a.Tool, Args: a.Args, Outcome: "expired", Detail: a.ID + " " + reason})
		}
		return final
	}
	for {
		select {
		case <-ctx.Done():
			return expire("the turn ended")
		case <-deadline.C:
			return expire("no decision before the deadline")
		case <-wake:
		case <-poll.C:
		}
		cur, err := d.cfg.Store.Approval(bg, a.ID)
		if err != nil {
			if !errors.Is(err, ErrNotFound) {
				log.Warn("read approval", "err", err)
			}
			continue
		}
		if cur.State != ApprovalPending {
			return cur
		}
	}
}

// waitFor registers a channel that Decide in this process signals.
func (d *Dispatcher) waitFor(id string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	d.mu.Lock()
	d.approvals[id] = ch
	d.mu.Unlock()
	return ch
}

func (d *Dispatcher) stopWaiting(id string) {
	d.mu.Lock()
	delete(d.approvals, id)
	d.mu.Unlock()
}

func (d *Dispatcher) wake(id string) {
	d.mu.Lock()
	ch := d.approvals[id]
	d.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Decide implements [Submitter]. Only the person whose message started the
// turn, or an admin of the chat, decides; "always" is for admins. A second
// click (a double click, two people, another replica) finds the decision
// made and changes nothing.
func (d *Dispatcher) Decide(ctx context.Context, dec Decision) (Decided, error) {
	a, err := d.cfg.Store.Approval(ctx, dec.ApprovalID)
	if errors.Is(err, ErrNotFound) {
		return Decided{Notice: "This request is no longer open."}, nil
	}
	if err != nil {
		return Decided{}, fmt.Errorf("read approval: %w", err)
	}
	refuse := func(why string) (Decided, error) {
		d.audit(ctx, AuditEntry{Action: AuditApprovalRefused, Platform: a.Key.Platform, Channel: a.Key.Channel().String(),
			User: auditUser(a.Key.Platform, dec.User.ID), Tool: a.Tool, Outcome: "refused", Detail: a.ID + ": " + why})
		return Decided{Approval: a, Notice: why}, nil
	}
	if dec.Chat.Platform != a.Key.Platform || dec.Chat.Channel() != a.Key.Channel() {
		return refuse("This request belongs to another conversation.")
	}
	if a.State != ApprovalPending {
		return Decided{Approval: a, Notice: outcomeLine(a)}, nil
	}
	admin := d.adminHere(ctx, a.Key, dec.User)
	switch {
	case dec.User.ID == "":
		return refuse("I cannot tell who clicked.")
	case dec.Always && !admin:
		return refuse("Only an admin can allow " + a.Tool + " here for good.")
	case dec.User.ID != a.Requester.ID && !admin:
		return refuse("Only " + who(a.Requester) + ", who asked, or an admin can decide this.")
	}
	state := ApprovalDenied
	if dec.Approve || dec.Always {
		state = ApprovalApproved
	}
	if time.Now().After(a.Deadline) {
		state = ApprovalExpired
	}
	final, decided, err := d.cfg.Store.DecideApproval(ctx, a.ID, ApprovalDecision{State: state, By: dec.User, At: time.Now().UTC(), Always: dec.Always && state == ApprovalApproved})
	if err != nil {
		return Decided{}, fmt.Errorf("decide approval: %w", err)
	}
	if !decided {
		return Decided{Approval: final, Notice: outcomeLine(final)}, nil
	}
	d.audit(ctx, AuditEntry{Action: AuditApprovalDecided, Platform: a.Key.Platform, Channel: a.Key.Channel().String(), User: auditUser(a.Key.Platform, dec.User.ID),
		Tool: a.Tool, Args: a.Args, Outcome: string(final.State), Detail: a.ID + alwaysNote(final)})
	if final.Always {
		if _, err := ChangePolicy(ctx, d.cfg.Store, a.Key, a.Key.Platform+":"+dec.User.ID,
			PolicyChange{Version: -1, Set: map[string]ToolMode{a.Tool: ToolAllow}}, d.knownTools()); err != nil {
			d.log.Error("always allow: policy not saved", "tool", a.Tool, "err", err)
		}
	}
	d.wake(a.ID)
	return Decided{Approval: final, Applied: true, Notice: outcomeLine(final)}, nil
}

func alwaysNote(a Approval) string {
	if a.Always {
		return " (always allow here)"
	}
	return ""
}

// outcomeLine says how an approval ended, for people.
func outcomeLine(a Approval) string {
	switch a.State {
	case ApprovalApproved:
		if a.Always {
			return fmt.Sprintf("Approved by %s; %s is allowed here from now on.", who(a.DecidedBy), a.Tool)
		}
		return "Approved by " + who(a.DecidedBy) + "."
	case ApprovalDenied:
		return "Denied by " + who(a.DecidedBy) + "."
	case ApprovalExpired:
		return "No decision in time, so " + a.Tool + " did not run."
	}
	return "Waiting for a decision."
}

// maxDescribed bounds the tools (or skills: a channel may have hundreds)
// listed for one group, so the answer stays one message.
const maxDescribed = 25

// describePolicy says a channel's policy in words.
func describePolicy(v PolicyView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tool policy here (default %s, %s):", v.Default.Mode, source(v.Default))
	for _, g := range v.Groups {
		fmt.Fprintf(&b, "\n• %s:", g.Name)
		for i, t := range g.Tools {
			if i == maxDescribed {
				fmt.Fprintf(&b, " and %d more", len(g.Tools)-i)
				break
			}
			fmt.Fprintf(&b, " %s=%s", t.Name, t.Reason.Mode)
		}
		if g.Rule != nil {
			fmt.Fprintf(&b, " (group rule %s, %s)", g.Rule.Mode, source(*g.Rule))
		}
	}
	if v.Editable {
		b.WriteString("\nChange it with: tools exec=ask web=deny (a group or a tool; =default removes this channel's rule).")
	} else {
		b.WriteString("\nOnly an admin can change it.")
	}
	return b.String()
}

// source says who set a rule.
func source(r Reason) string {
	if r.Layer == "channel" {
		s := "set here"
		if r.By != "" {
			s += " by " + r.By
		}
		if !r.At.IsZero() {
			s += " on " + r.At.UTC().Format("2006-01-02 15:04 UTC")
		}
		return s
	}
	if r.Rule == DefaultRule {
		return "the configured default"
	}
	return "configured"
}

// explain answers "why TOOL".
func explain(p *Policy, tool string, known []string) string {
	why := p.Why(tool)
	var b strings.Builder
	if !slices.Contains(known, tool) {
		return fmt.Sprintf("There is no tool %q here. Tools: %s.", tool, strings.Join(known, ", "))
	}
	verb := map[ToolMode]string{ToolAllow: "is allowed", ToolAsk: "needs a person's approval each time", ToolDeny: "is not allowed"}[why.Mode]
	fmt.Fprintf(&b, "%s %s here: ", tool, verb)
	switch {
	case why.Rule == DefaultRule:
		fmt.Fprintf(&b, "no rule names it or its group, so the default (%s, %s) applies.", why.Mode, source(why))
	default:
		fmt.Fprintf(&b, "the rule %s=%s, %s.", RuleLabel(why.Rule), why.Mode, source(why))
	}
	if g := GroupOf(tool); g != "" {
		fmt.Fprintf(&b, " It is in the %s group.", g)
	}
	return b.String()
}
