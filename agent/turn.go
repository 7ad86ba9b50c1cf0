package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/firstmate/firstmate/tools"
)

type turnResult int

const (
	turnDone       turnResult = iota
	turnLeaseLost             // another worker owns the session now
	turnNotSaved              // the store kept failing; the mailbox is still there
	turnHandedOver            // shutdown cut it short; the mailbox is still there
)

// errNotSaved hands a turn back before it ran: what it needs from the
// store (the channel's policy, an approval) could not be read, and failing
// the turn would consume the messages; the next holder does it.
var errNotSaved = errors.New("the turn's governance could not be read")

// turnRun is one turn of a session, from its claimed mailbox to its
// committed and shown answer.
type turnRun struct {
	d       *Dispatcher
	key     SessionKey
	claim   *Claim
	id      string // the turn's and its outbox entry's
	trigger Inbound
	th      Thread
	ws      *tools.Workspace
	log     *slog.Logger
	start   time.Time
	renewed atomic.Int64 // when the lease was last made good, Unix ns
}

// turn runs one turn over the claimed mailbox and commits it; it returns
// how it ended and the ID of the answer it showed (for the release to
// mark).
func (d *Dispatcher) turn(ctx context.Context, key SessionKey, s *session, claim *Claim, claimed time.Time, log *slog.Logger) (turnResult, string) {
	t := &turnRun{d: d, key: key, claim: claim, id: newID(), start: time.Now()}
	// Every log line of the turn carries its ID, and so does what the
	// answer's delivery logs.
	t.log = log.With("turn", t.id)
	t.trigger = trigger(claim.Mailbox)
	resume, authors, rerr := t.resumes(ctx)
	if t.trigger.Approval != "" && len(resume) > 0 && resume[0].Trigger.MessageID != "" {
		// Only decisions: the turn answers the message the question did.
		t.trigger = resume[0].Trigger
	}
	t.th = d.thread(key, t.trigger)
	if c, ok := t.th.(io.Closer); ok {
		// However the turn ends (even without an answer: a lost lease),
		// the thread lets go of what it holds for it.
		defer c.Close()
	}
	turnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d.mu.Lock()
	s.cancel, s.started, s.claimed = cancel, t.start, len(claim.Mailbox)
	if s.stop {
		s.stop = false
		cancel(ErrStopped)
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		s.cancel = nil
		d.mu.Unlock()
	}()
	t.renewed.Store(claimed.UnixNano())
	renewDone := keepLease(turnCtx, d, key, cancel, &t.renewed, t.log)
	ids := make([]string, len(claim.Mailbox))
	for i, m := range claim.Mailbox {
		ids[i] = m.MessageID
	}
	emit(turnCtx, t.th, TurnStarted{Key: key, MessageIDs: ids}, t.log)
	if ws, err := d.cfg.Workspaces.Open(key.Channel().String()); err != nil {
		t.log.Error("open workspace", "err", err)
	} else {
		// Open until the answer is shown: its attachments are read from it.
		defer ws.Close()
		t.ws = ws
	}
	gate, out, err := t.run(turnCtx, resume, authors, rerr)
	cancel(nil)
	<-renewDone
	if errors.Is(err, errNotSaved) {
		t.done(OutcomeNotSaved)
		return turnNotSaved, ""
	}
	return t.end(ctx, turnCtx, gate, out, err)
}

// trigger is the message a turn answers: the newest one a person wrote,
// else (a turn that only resumes an approval) the newest entry.
func trigger(mailbox []Inbound) Inbound {
	for i := len(mailbox) - 1; i >= 0; i-- {
		if mailbox[i].Approval == "" {
			return mailbox[i]
		}
	}
	return mailbox[len(mailbox)-1]
}

// run asks the gate for the turn's governance and runs the loop, going on
// from the decisions resume read (or failed to: rerr).
func (t *turnRun) run(ctx context.Context, resume []Approval, authors []User, rerr error) (TurnGate, *Outcome, error) {
	d := t.d
	input := Message{}
	if t.ws != nil {
		t.download(ctx)
		input = inputMessage(t.claim.Mailbox, d.cfg.Limits.MaxInputBytes)
		if len(t.claim.History) == 0 && t.key.Thread != "" && input.Role != "" {
			input.Content = t.threadContext(ctx, input.Content)
		}
	}
	err := rerr
	if err == nil && t.ws != nil {
		var gate TurnGate
		gate, err = d.cfg.Gate.Turn(ctx, TurnInfo{Key: t.key, Authors: authors, Trigger: t.trigger, Settings: t.claim.Settings, Log: t.log})
		if err == nil {
			history := TrimHistory(RepairHistory(t.claim.History), d.cfg.Limits.ContextTokens)
			out, err := d.cfg.Loop.Run(ctx, &Turn{Key: t.key, User: t.trigger.User, History: history, Resume: resume, Input: input,
				Tools: d.cfg.Tools, Workspace: t.ws, Thread: t.th, Gate: gate})
			return gate, out, err
		}
	}
	if ctx.Err() != nil {
		return nil, &Outcome{}, context.Cause(ctx) // stopped before it began
	}
	if err != nil {
		// Without its governance the turn cannot run safely: hand it back,
		// like a failing commit, for the next holder once the store answers.
		t.log.Error("read the turn's governance; handing the turn back", "err", err)
		return nil, nil, errNotSaved
	}
	// No workspace: the turn fails, and says so.
	msgs := []Message{}
	if input.Role != "" {
		msgs = append(msgs, input)
	}
	return nil, &Outcome{Messages: msgs}, errors.New("the channel's workspace could not be opened")
}

// resumes reads the decided approvals the mailbox resumes, in order, and
// names the people the turn runs for: the authors of its messages, and
// of those approvals.
func (t *turnRun) resumes(ctx context.Context) ([]Approval, []User, error) {
	var out []Approval
	var authors []User
	addAuthor := func(u User) {
		if !slices.ContainsFunc(authors, func(a User) bool { return a.ID == u.ID && a.Name == u.Name }) {
			authors = append(authors, u)
		}
	}
	for _, in := range t.claim.Mailbox {
		if in.Approval == "" {
			addAuthor(in.User)
			continue
		}
		a, err := t.d.cfg.Gate.Approval(ctx, in.Approval)
		switch {
		case errors.Is(err, ErrNotFound):
			t.log.Warn("an approval to resume is gone (expired from the store)", "approval", in.Approval)
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("read approval %s: %w", in.Approval, err)
		case a.State == ApprovalPending || a.Key != t.key:
			continue
		}
		for _, u := range a.Authors {
			addAuthor(u)
		}
		out = append(out, a)
	}
	return out, authors, nil
}

// done tells the observer how the turn ended.
func (t *turnRun) done(outcome string) {
	if t.d.cfg.Observer != nil {
		t.d.cfg.Observer.TurnDone(t.key.Platform, outcome, time.Since(t.start))
	}
}

// end commits the turn, with what to show, so the history stays whole,
// the mailbox entries are not answered twice, and the answer survives a
// crash before it is shown; then shows it. turnCtx says how the turn was
// cut short, if it was.
func (t *turnRun) end(ctx, turnCtx context.Context, gate TurnGate, out *Outcome, err error) (turnResult, string) {
	d, log := t.d, t.log
	took := time.Since(t.start)
	bg := context.WithoutCancel(ctx)
	flush := func(unspent Spent) {
		if gate != nil {
			gate.Flush(bg, unspent)
		}
	}
	if errors.Is(context.Cause(turnCtx), ErrLeaseLost) {
		log.Warn("lease lost mid-turn; another worker takes the session over")
		flush(Spent{})
		t.done(OutcomeLeaseLost)
		return turnLeaseLost, ""
	}
	if errors.Is(err, ErrShutdown) {
		// Handed back, not answered: the messages stay in the mailbox and
		// the turn is done again by another replica or after the restart.
		log.Info("shutting down mid-turn; handing the session back", "steps", out.Steps, "tools", out.ToolCalls, "took", took)
		flush(Spent{})
		// Say so where the progress stopped, so that nobody wonders or
		// sends it again; the answer comes from the next holder.
		nctx, ncancel := context.WithTimeout(bg, handOverNote)
		emit(nctx, t.th, Notice{Text: handedOverText(out.ToolCalls)}, log)
		ncancel()
		t.done(OutcomeHandedOver)
		return turnHandedOver, ""
	}
	ob, err := t.outbound(bg, gate, out, err, took)
	if errors.Is(err, errNotSaved) {
		flush(Spent{})
		t.done(OutcomeNotSaved)
		return turnNotSaved, ""
	}
	if cerr := t.commit(bg, out.Messages, ob); cerr != nil {
		flush(ob.Spent) // the tokens were spent all the same
		if errors.Is(cerr, ErrLeaseLost) {
			log.Warn("lease lost before commit; another worker takes the session over")
			t.done(OutcomeLeaseLost)
			return turnLeaseLost, ""
		}
		// Nothing is shown: the messages are still in the mailbox, and
		// whoever holds the session next answers them, once.
		log.Error("commit kept failing while the lease lasted; the turn is done again later", "err", cerr)
		t.done(OutcomeNotSaved)
		return turnNotSaved, ""
	}
	switch {
	case errors.Is(err, ErrStopped):
		t.done(OutcomeStopped)
	case err != nil:
		t.done(OutcomeFailed)
	default:
		t.done(OutcomeAnswered)
	}
	// Showing may wait for the chat's pace (a Slack DM takes a post a
	// second) or a 429: meanwhile this worker serves other sessions, and
	// the lease is kept, so that nobody else shows the answer too.
	showCtx, showDone := context.WithCancelCause(bg)
	renewDone := keepLease(showCtx, d, t.key, showDone, &t.renewed, log)
	d.park()
	show(bg, d, t.th, t.ws, *ob, err, log)
	d.unpark()
	showDone(nil)
	<-renewDone
	// Marked shown by the release that follows, in the same round trip.
	return turnDone, ob.ID
}

// outbound is what the turn shows: its answer, its failure, or the
// question of a call that waits for a person (recorded with the gate
// here, before the commit, so that nobody can click it before the turn is
// saved). It returns the error the turn ended with, errNotSaved if the
// question could not be recorded.
func (t *turnRun) outbound(ctx context.Context, gate TurnGate, out *Outcome, err error, took time.Duration) (*Outbound, error) {
	ob := &Outbound{ID: t.id, Trigger: t.trigger, Steps: out.Steps, Tools: out.ToolCalls, Took: took}
	switch {
	case err != nil:
		ob.Failure = userMessage(err, t.d.cfg.Loop.Timeout)
		t.log.Warn("turn failed", "err", err, "steps", out.Steps, "tools", out.ToolCalls, "took", took)
	case out.Pending != nil:
		a, aerr := gate.Ask(ctx, *out.Pending)
		if aerr != nil {
			t.log.Error("record an approval; handing the turn back", "err", aerr)
			return ob, errNotSaved
		}
		ob.Ask, ob.Answer = &a, out.Answer
		t.log.Info("turn waits for an approval", "approval", a.ID, "rule", a.Tool, "steps", out.Steps, "tools", out.ToolCalls, "took", took)
	default:
		ob.Answer = out.Answer
		ob.Files = dedupe(out.Files)
		t.log.Info("turn done", "steps", out.Steps, "tools", out.ToolCalls, "took", took,
			"prompt_tokens", out.Usage.PromptTokens, "completion_tokens", out.Usage.CompletionTokens)
	}
	if gate != nil {
		ob.Spent = gate.Spent()
	}
	return ob, err
}

// show shows an outbox entry in th. Showing may wait out a platform's
// rate limits (adapters give up after a few minutes) and upload files.
func show(ctx context.Context, d *Dispatcher, th Thread, ws *tools.Workspace, ob Outbound, cause error, log *slog.Logger) {
	ectx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var err error
	switch {
	case th == nil:
	case ob.Failure != "":
		err = th.Emit(ectx, Failed{Message: ob.Failure, Err: cause})
	case ob.Ask != nil:
		a := ob.Ask
		err = th.Emit(ectx, ApprovalNeeded{CallID: a.CallID, Name: a.Tool, Args: []byte(a.Args), ID: a.ID, Requester: a.Requester,
			Authors: a.Authors, Deadline: a.Deadline, Text: ob.Answer, Steps: ob.Steps, Tools: ob.Tools, Took: ob.Took})
	default:
		var files []Attachment
		if ws != nil {
			files = attachments(ws, ob.Files, d.cfg.Limits.MaxAttachBytes)
		}
		err = th.Emit(ectx, Answer{Text: ob.Answer, Files: files, Steps: ob.Steps, Tools: ob.Tools, Took: ob.Took})
	}
	if err != nil {
		log.Warn("showing the answer failed", "err", err)
	}
	if d.cfg.Observer != nil {
		d.cfg.Observer.Delivered(err == nil)
	}
}

// redeliver shows an answer that a holder committed but did not show, and
// marks it shown. An entry that cannot be shown is still marked: the
// renderer has tried what it could, and trying forever would hold the
// session. Until it is marked, whoever holds the session next shows it
// again: a store that is down for a while is waited for, as a commit is.
func (d *Dispatcher) redeliver(ctx context.Context, key SessionKey, ob Outbound, log *slog.Logger) {
	log = log.With("turn", ob.ID)
	log.Info("showing an answer committed by an earlier holder", "answers", ob.Trigger.MessageID)
	th := d.thread(key, ob.Trigger)
	if c, ok := th.(io.Closer); ok {
		defer c.Close()
	}
	var ws *tools.Workspace
	if len(ob.Files) > 0 {
		var err error
		if ws, err = d.cfg.Workspaces.Open(key.Channel().String()); err != nil {
			log.Warn("open workspace for attachments", "err", err)
		} else {
			defer ws.Close()
		}
	}
	show(ctx, d, th, ws, ob, nil, log)
	err := retry(ctx, time.Now().Add(2*d.cfg.LeaseTTL), log, "mark the answer shown", func(ctx context.Context) error {
		return d.cfg.Store.Delivered(ctx, key, ob.ID)
	}, func(err error) bool { return err == nil })
	if err != nil {
		log.Error("could not mark the answer shown; it may be shown again", "err", err)
	}
}

func dedupe(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// attachments describes the files a turn attached, each opened through the
// workspace (with its checks) when the thread uploads it.
// handOverNote bounds how long a turn handed back at shutdown waits for its
// note to be shown: shutdown is waiting on it.
const handOverNote = 3 * time.Second

// handedOverText is the note a turn handed back at shutdown leaves in its
// thread.
func handedOverText(tools int) string {
	done := ""
	if tools > 0 {
		done = fmt.Sprintf(" after %d tool %s", tools, plural(tools, "call", "calls"))
	}
	return "⏸ Interrupted by a restart" + done + ". Your message is kept: the work starts over in a moment, nothing to send again."
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func attachments(ws *tools.Workspace, paths []string, max int64) []Attachment {
	var out []Attachment
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, Attachment{Path: p, Open: func() (io.ReadCloser, int64, error) {
			return openAttachment(ws, p, max)
		}})
	}
	return out
}

// openAttachment opens a file to upload once, checks it on that
// descriptor, and reads no more than the size it checked: a command that
// grows the file after the check (send_file's, or this one) cannot make
// the upload larger.
func openAttachment(ws *tools.Workspace, p string, max int64) (io.ReadCloser, int64, error) {
	f, fi, err := ws.OpenRead(p)
	if err != nil {
		return nil, 0, err
	}
	if fi.Size() > max {
		f.Close()
		return nil, 0, fmt.Errorf("%s is %s, over the %s an attachment may be", p, tools.FormatSize(fi.Size()), tools.FormatSize(max))
	}
	return limitedFile{io.LimitReader(f, fi.Size()), f}, fi.Size(), nil
}

type limitedFile struct {
	io.Reader
	io.Closer
}

// download saves the files that came with the mailbox's messages into the
// workspace, when the platform can fetch them. A file that fails keeps its
// error, which the turn's input tells the model.
func (t *turnRun) download(ctx context.Context) {
	mailbox, ws, log := t.claim.Mailbox, t.ws, t.log
	dl, ok := t.d.cfg.Platforms[t.key.Platform].(Downloader)
	if !ok {
		return
	}
	for i := range mailbox {
		for j := range mailbox[i].Files {
			f := &mailbox[i].Files[j]
			if f.Path != "" || f.Error != "" {
				continue
			}
			path, err := dl.Download(ctx, *f, ws)
			if err != nil {
				log.Warn("download file", "file", f.Name, "err", err)
				f.Error = err.Error()
				continue
			}
			f.Path = path
		}
	}
}

// withThreadContext prepends the thread's earlier messages, when the
// platform can read them, to the first turn of a session that starts inside
// an existing thread.
func (t *turnRun) threadContext(ctx context.Context, input string) string {
	d, key, trigger, log := t.d, t.key, t.trigger, t.log
	r, ok := d.cfg.Platforms[key.Platform].(ThreadReader)
	if !ok {
		return input
	}
	earlier, err := r.EarlierMessages(ctx, key, trigger)
	if err != nil {
		log.Warn("read earlier thread messages", "err", err)
		return input
	}
	if earlier = strings.TrimSpace(earlier); earlier == "" {
		return input
	}
	max := d.cfg.Limits.MaxInputBytes / 2
	if len(earlier) > max {
		// Keep the newest part: it is what the question is about.
		cut := len(earlier) - max
		for cut < len(earlier) && earlier[cut]&0xC0 == 0x80 {
			cut++
		}
		earlier = "[earlier messages cut]\n" + earlier[cut:]
	}
	return "[Earlier messages in this thread, for context]\n" + earlier + "\n\n[The message to answer]\n" + input
}

// release ends owner's hold on the session unless messages wait, and
// marks the answer shown (if any) in the same call. Until the mark is made,
// whoever holds the session next shows the answer again: a store that is
// down for a while is waited for, as a commit is.
func (d *Dispatcher) release(ctx context.Context, key SessionKey, shown string, log *slog.Logger) (int, error) {
	var pending int
	err := retry(ctx, time.Now().Add(2*d.cfg.LeaseTTL), log, "release and mark the answer shown", func(ctx context.Context) error {
		var err error
		pending, err = d.cfg.Store.Release(ctx, key, d.owner, shown)
		return err
	}, func(err error) bool {
		// A lost lease is reported after the mark, which needs none.
		return err == nil || shown == "" || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrInvalid)
	})
	if err != nil && shown != "" && !errors.Is(err, ErrLeaseLost) {
		log.Error("could not mark the answer shown; it may be shown again", "err", err)
	}
	return pending, err
}

// commit saves a turn. A store that fails (a Redis failover takes seconds)
// is retried with backoff while the lease lasts: after that another holder
// may have taken the session, and the owner check would refuse anyway. A
// lost lease is final at once.
func (t *turnRun) commit(ctx context.Context, msgs []Message, ob *Outbound) error {
	until := time.Unix(0, t.renewed.Load()).Add(t.d.cfg.LeaseTTL)
	return retry(ctx, until, t.log, "commit", func(ctx context.Context) error {
		return t.d.cfg.Store.Commit(ctx, t.key, t.d.owner, len(t.claim.Mailbox), msgs, ob)
	}, func(err error) bool { return err == nil || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrInvalid) })
}

// retry calls op, each call bounded to 10 s, until final says its error
// is the last word, until would pass before the next try, or ctx ends;
// it waits 100 ms after the first failure, twice as long after each next,
// at most 2 s. It returns op's last error.
func retry(ctx context.Context, until time.Time, log *slog.Logger, what string, op func(context.Context) error, final func(error) bool) error {
	wait := 100 * time.Millisecond
	for {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := op(octx)
		cancel()
		if final(err) || time.Now().Add(wait).After(until) {
			return err
		}
		log.Warn(what+" failed; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}
