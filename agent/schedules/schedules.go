// Package schedules is work that runs later: a prompt posted into the
// thread it was made in, as a new message from the person who made it:
// once, on a cron, or when a turn's wait ends (after a delay, or when a
// background job ends). See [Scheduler].
package schedules

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/schedule"
)

// Work that runs later. A schedule is a prompt posted into the thread it
// was made in, as a new message from the person who made it: once, on a
// cron, or when a turn's wait ends (after a delay, or when a background
// job ends). It is kept in the store ([ScheduleStore]); when it is due, one
// replica claims it (the store moves it to a firing state with a lease),
// enqueues its message with an ID made of the schedule's ID and due time
// (so that a second enqueue, by a replica that took over from one that
// died mid-way, is a duplicate the mailbox drops), then reschedules it (a
// cron) or deletes it. The message then goes the way of any other: the
// session's lease, the channel's policy and budgets apply to its turn.

// Schedule is one schedule as the store keeps it.
type Schedule struct {
	ID     string           `json:"id"`
	Key    agent.SessionKey `json:"key"` // the thread (or flat chat) it posts into
	By     agent.User       `json:"by"`  // who made it: the message's author
	Kind   schedule.Kind    `json:"kind"`
	Prompt string           `json:"prompt,omitempty"`
	Cron   string           `json:"cron,omitempty"` // five fields
	TZ     string           `json:"tz,omitempty"`   // the cron's time zone (IANA name): its channel's when it was made
	Job    int              `json:"job,omitempty"`  // a job wait: the job's ID
	Space  string           `json:"space,omitempty"`
	// Due is when it fires next; a job wait's next look at its job.
	Due time.Time `json:"due"`
	// Until is when a job wait gives up waiting.
	Until   time.Time `json:"until,omitzero"`
	Created time.Time `json:"created"`
	// Owner and Lease are the store's: the replica posting it now and
	// until when it may (see ScheduleStore.ClaimSchedules); empty while
	// it waits.
	Owner string    `json:"owner,omitempty"`
	Lease time.Time `json:"lease,omitzero"`
}

// Store keeps schedules where every replica sees them, and reads a
// channel's settings (its time zone). Both stores implement it;
// store/storetest holds its conformance tests. A schedule is pending
// (waiting for its Due) or firing (claimed by an owner until its lease
// ends).
type Store interface {
	// Settings returns a channel's settings (the zero value if none).
	Settings(ctx context.Context, channel agent.SessionKey) (agent.ChannelSettings, error)
	// AddSchedule stores s, pending, unless its channel (the threads of
	// s.Key's channel together) holds max schedules already: then
	// ErrScheduleLimit, and nothing is stored. s needs an ID not stored
	// yet, a valid key and a Due; otherwise agent.ErrInvalid.
	AddSchedule(ctx context.Context, s Schedule, max int) error
	// Schedules lists a channel's schedules, those of all its threads,
	// soonest due first, the firing ones with their Owner and Lease.
	Schedules(ctx context.Context, channel agent.SessionKey) ([]Schedule, error)
	// RemoveSchedule deletes the channel's schedule id, pending or firing,
	// and returns it; agent.ErrNotFound if the channel has none with that ID.
	RemoveSchedule(ctx context.Context, channel agent.SessionKey, id string) (Schedule, error)
	// ClaimSchedules hands owner up to limit schedules, most overdue
	// first: pending ones whose Due has come (by the store's clock), and
	// firing ones whose lease ended (the replica that claimed them died
	// before it finished). Each becomes firing, held by owner for ttl,
	// atomically: of two callers, one gets it. Due is left as it was.
	ClaimSchedules(ctx context.Context, owner string, ttl time.Duration, limit int) ([]Schedule, error)
	// FinishSchedule ends owner's firing of s: with next set, s is
	// pending again, due at next (the rest of s as stored); with next
	// zero, it is deleted. agent.ErrLeaseLost if owner no longer holds it
	// (another owner claimed it after its lease ended, or it is
	// pending); agent.ErrNotFound if it was removed meanwhile.
	FinishSchedule(ctx context.Context, s Schedule, owner string, next time.Time) error
}

var (
	// ErrScheduleLimit is returned by AddSchedule for a channel that has
	// as many schedules as it may.
	ErrScheduleLimit = errors.New("the channel's schedule limit is reached")
	// ErrNotYours refuses to remove someone else's schedule to a person
	// who is not an admin there.
	ErrNotYours = errors.New("only its maker or an admin can remove a schedule")
)

// Gate is what schedules ask of the gate (agent/govern): who administers
// a channel, whether a schedule may post when it comes due (its maker may
// still talk to the bot there, and the channel still allows work later),
// a channel's time zone changed by an admin, and the audit log.
type Gate interface {
	Admin(ctx context.Context, chat agent.SessionKey, u agent.User) bool
	MayPost(ctx context.Context, key agent.SessionKey, by agent.User) error
	SetTimeZone(ctx context.Context, chat agent.SessionKey, u agent.User, name string) (agent.ChannelSettings, error)
	Audit(ctx context.Context, e govern.AuditEntry)
}

// Poster puts a schedule's message into its session's mailbox, as the
// Dispatcher's Enqueue does: deduplicated by its ID, and the session
// scheduled for a turn.
type Poster interface {
	Enqueue(ctx context.Context, in agent.Inbound) (added bool, err error)
}

// Config bounds schedules. Zero fields take the defaults.
type Config struct {
	// PerChannel is how many schedules (waits included) a channel may
	// hold at once; default 20.
	PerChannel int
	// MinInterval is the least time between two firings of a cron;
	// default 5m.
	MinInterval time.Duration
	// Location is the time zone of crons and of times written without an
	// offset in the channels that set none of their own (ChannelSettings.
	// TimeZone); default UTC.
	Location *time.Location
	// MaxAhead is how far ahead a single firing may be; default 366 days.
	MaxAhead time.Duration
	// MaxWait is the longest wait, and the longest a job wait waits;
	// default 24h.
	MaxWait time.Duration
	// JobPoll is how often a job wait looks at its job; default 2s (the
	// beat of a running job).
	JobPoll time.Duration
	// Every is how often each replica looks for due schedules; default 1s.
	Every time.Duration
	// Jobs is the background jobs' board job waits read; nil takes their
	// jobs for gone.
	Jobs tools.JobBoard
}

// Defaults are the bounds of Config's zero fields.
var Defaults = Config{PerChannel: 20, MinInterval: 5 * time.Minute, Location: time.UTC,
	MaxAhead: 366 * 24 * time.Hour, MaxWait: 24 * time.Hour, JobPoll: 2 * time.Second, Every: time.Second}

func (c Config) withDefaults() Config {
	d := Defaults
	if c.PerChannel <= 0 {
		c.PerChannel = d.PerChannel
	}
	if c.MinInterval <= 0 {
		c.MinInterval = d.MinInterval
	}
	if c.Location == nil {
		c.Location = d.Location
	}
	if c.MaxAhead <= 0 {
		c.MaxAhead = d.MaxAhead
	}
	if c.MaxWait <= 0 {
		c.MaxWait = d.MaxWait
	}
	if c.JobPoll <= 0 {
		c.JobPoll = d.JobPoll
	}
	if c.Every <= 0 {
		c.Every = d.Every
	}
	return c
}

// fireLease is how long a replica holds a schedule it posts: far longer
// than posting takes (a few store calls), short enough that the schedule
// of a replica that died mid-way is posted by another soon after.
const fireLease = 30 * time.Second

// claimBatch is the most schedules one look claims.
const claimBatch = 64

// Scheduler makes, lists and removes schedules for people (the schedule
// commands, [Scheduler.RunCommand]) and for the model (package
// tools/schedule's tools, whose [schedule.Scheduler] it is), and posts
// them when they are due ([Scheduler.Run]). Its tools are made before the
// gate and the dispatcher that it needs to post: [Scheduler.Bind] gives
// them, before anything runs.
type Scheduler struct {
	store Store
	cfg   Config

	mu     sync.Mutex
	gate   Gate
	poster Poster
}

var (
	_ schedule.Scheduler  = (*Scheduler)(nil)
	_ agent.CommandRunner = (*Scheduler)(nil)
)

// New returns a scheduler over st.
func New(st Store, cfg Config) *Scheduler {
	return &Scheduler{store: st, cfg: cfg.withDefaults()}
}

// Config returns the scheduler's bounds, defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

// Bind gives the scheduler the gate it asks and the poster its due
// schedules go to.
func (s *Scheduler) Bind(g Gate, p Poster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate, s.poster = g, p
}

func (s *Scheduler) bound() (Gate, Poster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gate, s.poster
}

// admin reports whether u administers key's channel.
func (s *Scheduler) admin(ctx context.Context, key agent.SessionKey, u agent.User) bool {
	g, _ := s.bound()
	return g != nil && g.Admin(ctx, key, u)
}

func (s *Scheduler) audit(ctx context.Context, e govern.AuditEntry) {
	if g, _ := s.bound(); g != nil {
		g.Audit(ctx, e)
	}
}

// rules are what a When may say in a channel of time zone loc.
func (s *Scheduler) rules(loc *time.Location) schedule.Rules {
	return schedule.Rules{Location: loc, MinInterval: s.cfg.MinInterval, MaxAhead: s.cfg.MaxAhead}
}

// zone is the time zone of key's channel: the one its admins set, else
// the configured one.
func (s *Scheduler) zone(ctx context.Context, key agent.SessionKey) (*time.Location, error) {
	cs, err := s.store.Settings(ctx, key.Channel())
	if err != nil {
		return nil, fmt.Errorf("read the channel's time zone: %w", err)
	}
	return s.location(cs.TimeZone), nil
}

// location is the zone a stored name names: the configured one if it
// names none (empty, or not in this host's zone database).
func (s *Scheduler) location(name string) *time.Location {
	if name == "" {
		return s.cfg.Location
	}
	loc, err := agent.ParseTimeZone(name)
	if err != nil {
		return s.cfg.Location
	}
	return loc
}

// callKey reads the conversation and person of a tool call.
func callKey(c tools.Call) (agent.SessionKey, agent.User, error) {
	key, err := agent.ParseSessionKey(c.Session)
	if err != nil {
		return agent.SessionKey{}, agent.User{}, err
	}
	return key, agent.User{ID: c.User, Name: c.UserName}, nil
}

// Schedule implements [schedule.Scheduler].
func (s *Scheduler) Schedule(ctx context.Context, c tools.Call, p schedule.Plan) (schedule.Entry, error) {
	key, u, err := callKey(c)
	if err != nil {
		return schedule.Entry{}, err
	}
	loc, err := s.zone(ctx, key)
	if err != nil {
		return schedule.Entry{}, err
	}
	sch, err := s.add(ctx, key, u, p, loc)
	if err != nil {
		return schedule.Entry{}, err
	}
	return s.entry(sch, key, u, loc), nil
}

// List implements [schedule.Scheduler].
func (s *Scheduler) List(ctx context.Context, c tools.Call) (schedule.Listing, error) {
	key, u, err := callKey(c)
	if err != nil {
		return schedule.Listing{}, err
	}
	return s.list(ctx, key, u)
}

// Unschedule implements [schedule.Scheduler].
func (s *Scheduler) Unschedule(ctx context.Context, c tools.Call, id string) (schedule.Entry, error) {
	key, u, err := callKey(c)
	if err != nil {
		return schedule.Entry{}, err
	}
	return s.unschedule(ctx, key, u, id)
}

// unschedule removes the schedule id of key's channel for by, and shows
// it as it was.
func (s *Scheduler) unschedule(ctx context.Context, key agent.SessionKey, by agent.User, id string) (schedule.Entry, error) {
	loc, err := s.zone(ctx, key)
	if err != nil {
		return schedule.Entry{}, err
	}
	sch, err := s.remove(ctx, key, by, id)
	if err != nil {
		return schedule.Entry{}, err
	}
	return s.entry(sch, key, by, loc), nil
}

// add makes a schedule in key's conversation for by; a cron, and a time
// without an offset, are read in loc, the channel's time zone.
func (s *Scheduler) add(ctx context.Context, key agent.SessionKey, by agent.User, p schedule.Plan, loc *time.Location) (Schedule, error) {
	if err := key.Validate(); err != nil {
		return Schedule{}, err
	}
	now := time.Now()
	sch := Schedule{Key: key, By: by, Kind: p.Kind, Prompt: strings.TrimSpace(p.Prompt), Created: now.UTC()}
	switch p.Kind {
	case schedule.Once, schedule.Cron:
		if sch.Prompt == "" {
			return Schedule{}, fmt.Errorf("%w: say what to post when it fires", schedule.ErrBadWhen)
		}
		t, err := s.rules(loc).Parse(p.When, now)
		if err != nil {
			return Schedule{}, err
		}
		sch.Kind, sch.Due = schedule.Once, t.Due
		if t.Cron != "" {
			// It keeps this zone should the channel's change: "0 9 * * *"
			// made for Tokyo's mornings stays so.
			sch.Kind, sch.Cron, sch.TZ = schedule.Cron, t.Cron, loc.String()
		}
	case schedule.Wait:
		if p.Wait <= 0 || p.Wait > s.cfg.MaxWait {
			return Schedule{}, fmt.Errorf("%w: a wait is from a second to %s; %s is not", schedule.ErrBadWhen, schedule.Round(s.cfg.MaxWait), schedule.Round(p.Wait))
		}
		sch.Due = now.Add(p.Wait)
	case schedule.Job:
		wait := p.Wait
		if wait == 0 {
			wait = s.cfg.MaxWait
		}
		if wait < 0 || wait > s.cfg.MaxWait {
			return Schedule{}, fmt.Errorf("%w: a wait for a job lasts at most %s", schedule.ErrBadWhen, schedule.Round(s.cfg.MaxWait))
		}
		if p.Job <= 0 || p.Space == "" {
			return Schedule{}, fmt.Errorf("%w job wait: no job", agent.ErrInvalid)
		}
		sch.Job, sch.Space = p.Job, p.Space
		sch.Due, sch.Until = now.Add(s.cfg.JobPoll), now.Add(wait)
	default:
		return Schedule{}, fmt.Errorf("%w schedule kind %q", agent.ErrInvalid, p.Kind)
	}
	sch.Due = sch.Due.Round(0) // no monotonic reading: it is stored
	var err error
	for range 2 { // a new ID once, should the first be taken
		sch.ID = newScheduleID()
		if err = s.store.AddSchedule(ctx, sch, s.cfg.PerChannel); !errors.Is(err, agent.ErrInvalid) {
			break
		}
	}
	switch {
	case errors.Is(err, ErrScheduleLimit):
		return Schedule{}, agent.Toldf(ErrScheduleLimit, "this channel has %d schedules and waits, its most; remove one first (schedules lists them)", s.cfg.PerChannel)
	case err != nil:
		return Schedule{}, fmt.Errorf("store the schedule: %w", err)
	}
	s.audit(ctx, govern.AuditEntry{Action: govern.AuditScheduleAdd, Platform: key.Platform, Channel: key.Channel().String(),
		User: govern.AuditUser(key.Platform, by.ID), Tool: string(sch.Kind), Args: agent.Shorten(sch.Prompt, 200), Detail: sch.ID + " " + when(sch)})
	return sch, nil
}

// when is a schedule's timing for the audit log.
func when(s Schedule) string {
	switch s.Kind {
	case schedule.Cron:
		return fmt.Sprintf("cron %q %s", s.Cron, s.TZ)
	case schedule.Job:
		return fmt.Sprintf("job %d until %s", s.Job, s.Until.UTC().Format(time.RFC3339))
	}
	return "at " + s.Due.UTC().Format(time.RFC3339)
}

// list returns the schedules of key's channel by may see: their own, or
// all if by is an admin there; how many others there are; and the
// channel's time zone, which their times are shown in.
func (s *Scheduler) list(ctx context.Context, key agent.SessionKey, by agent.User) (schedule.Listing, error) {
	loc, err := s.zone(ctx, key)
	if err != nil {
		return schedule.Listing{}, err
	}
	all, err := s.store.Schedules(ctx, key.Channel())
	if err != nil {
		return schedule.Listing{}, fmt.Errorf("list schedules: %w", err)
	}
	out := schedule.Listing{Loc: loc}
	asked, admin := false, false
	for _, sch := range all {
		if !mine(sch, by) {
			if !asked {
				// Asked only when it matters: it may be a platform call.
				asked, admin = true, s.admin(ctx, key, by)
			}
			if !admin {
				out.Others++
				continue
			}
		}
		out.Entries = append(out.Entries, s.entry(sch, key, by, loc))
	}
	return out, nil
}

// mine reports whether u made s. People a platform does not name (the
// terminal's operator) cannot be told apart, so they share theirs.
func mine(s Schedule, u agent.User) bool { return s.By.ID == u.ID }

// remove deletes the schedule id of key's channel if by made it or is an
// admin there.
func (s *Scheduler) remove(ctx context.Context, key agent.SessionKey, by agent.User, id string) (Schedule, error) {
	channel := key.Channel()
	all, err := s.store.Schedules(ctx, channel)
	if err != nil {
		return Schedule{}, fmt.Errorf("list schedules: %w", err)
	}
	i := slices.IndexFunc(all, func(sch Schedule) bool { return strings.EqualFold(sch.ID, id) })
	if id == "" || i < 0 {
		return Schedule{}, agent.Toldf(agent.ErrNotFound, "this channel has no schedule %q; schedules lists them", id)
	}
	if !mine(all[i], by) && !s.admin(ctx, key, by) {
		return Schedule{}, fmt.Errorf("%w: %s was made by %s", ErrNotYours, all[i].ID, all[i].By.Display())
	}
	removed, err := s.store.RemoveSchedule(ctx, channel, all[i].ID)
	if errors.Is(err, agent.ErrNotFound) {
		return Schedule{}, agent.Toldf(agent.ErrNotFound, "schedule %s is gone already (it fired, or was removed)", all[i].ID)
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("remove the schedule: %w", err)
	}
	s.audit(ctx, govern.AuditEntry{Action: govern.AuditScheduleRemove, Platform: key.Platform, Channel: channel.String(),
		User: govern.AuditUser(key.Platform, by.ID), Tool: string(removed.Kind), Args: agent.Shorten(removed.Prompt, 200),
		Detail: removed.ID + " by " + govern.AuditUser(key.Platform, removed.By.ID)})
	return removed, nil
}

// entry is how the tools and commands show sch to by in key's thread,
// its times in loc, the channel's time zone.
func (s *Scheduler) entry(sch Schedule, key agent.SessionKey, by agent.User, loc *time.Location) schedule.Entry {
	var tz string
	if sch.Kind == schedule.Cron {
		tz = s.location(sch.TZ).String()
	}
	return schedule.Entry{ID: sch.ID, Kind: sch.Kind, Prompt: sch.Prompt, Due: sch.Due, Until: sch.Until, Cron: sch.Cron,
		TZ: tz, Job: sch.Job, By: sch.By.Display(), Mine: mine(sch, by), Elsewhere: sch.Key != key, Firing: sch.Owner != "", Loc: loc}
}

// newScheduleID is six characters of agent.IDAlphabet: easy to type, and one in
// about 900 million of clashing with another (which AddSchedule refuses).
func newScheduleID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = agent.IDAlphabet[int(b[i])%len(agent.IDAlphabet)]
	}
	return string(b[:])
}

// MessageID is the ID of the message a firing posts: the same for every
// replica that posts this firing, so that the mailbox keeps one.
func (sch Schedule) MessageID() string {
	return "sched:" + sch.ID + ":" + strconv.FormatInt(sch.Due.UnixMilli(), 10)
}

// inbound is the message a firing posts, text as the turn reads it.
func (sch Schedule) inbound(text string, now time.Time) agent.Inbound {
	return agent.Inbound{Key: sch.Key, MessageID: sch.MessageID(), User: sch.By, Text: text, Addressed: true, Time: now.UTC()}
}

// Run looks for due schedules every Config.Every, and posts them, until
// ctx ends. owner names this replica's claims (its lease owner); several
// replicas each run one, and each due schedule is posted once.
func (s *Scheduler) Run(ctx context.Context, owner string, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		// A look at once: what fell due while firstmate was down fires now.
		due, err := s.store.ClaimSchedules(ctx, owner, fireLease, claimBatch)
		if err != nil && ctx.Err() == nil {
			log.Warn("claim due schedules", "err", err)
		}
		for _, sch := range due {
			s.fire(ctx, sch, owner, log)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fire posts a claimed schedule's message, then reschedules or deletes
// it. A step that fails leaves it firing: when its lease ends it is
// claimed again (by any replica) and posted with the same message ID.
func (s *Scheduler) fire(ctx context.Context, sch Schedule, owner string, log *slog.Logger) {
	log = log.With("schedule", sch.ID, "session", sch.Key.String(), "kind", string(sch.Kind))
	now := time.Now()
	// The time the turn reads is in the channel's zone, as everywhere
	// else; should its settings not read now, the configured zone will do.
	created := func() string {
		loc, err := s.zone(ctx, sch.Key)
		if err != nil {
			log.Warn("read the channel's time zone; the configured one is used", "err", err)
			loc = s.cfg.Location
		}
		return sch.Created.In(loc).Format(schedule.Layout)
	}
	var text string
	switch sch.Kind {
	case schedule.Job:
		report, over := s.lookAtJob(ctx, sch, now)
		if !over {
			s.finishFiring(ctx, sch, owner, now.Add(s.cfg.JobPoll), log)
			return
		}
		text = "[woken: " + report + "]\n" + noteOr(sch.Prompt)
	case schedule.Wait:
		text = fmt.Sprintf("[woken: the wait of %s asked for at %s is over; wait %s]\n%s", schedule.Round(sch.Due.Sub(sch.Created)),
			created(), sch.ID, noteOr(sch.Prompt))
	default:
		how := "once"
		if sch.Kind == schedule.Cron {
			how = fmt.Sprintf("cron %q, %s", sch.Cron, s.location(sch.TZ))
		}
		text = fmt.Sprintf("[scheduled by %s at %s; schedule %s, %s] %s", sch.By.Display(),
			created(), sch.ID, how, sch.Prompt)
	}
	in := sch.inbound(text, now)
	gate, poster := s.bound()
	if gate == nil || poster == nil {
		log.Warn("a schedule came due before the scheduler was bound; it is posted again later")
		return
	}
	// Power is checked where it is spent: whoever made it must still be
	// let in, and the channel must still allow work later. The rate of a
	// person's messages is not counted: a schedule is not someone typing,
	// and the channel's limit on schedules bounds it.
	switch err := gate.MayPost(ctx, sch.Key, sch.By); {
	case errors.Is(err, tools.ErrNotPermitted):
		log.Info("schedule not posted", "why", err.Error())
		s.audit(ctx, govern.AuditEntry{Action: govern.AuditScheduleSkipped, Platform: sch.Key.Platform, Channel: sch.Key.Channel().String(),
			User: govern.AuditUser(sch.Key.Platform, sch.By.ID), Tool: string(sch.Kind), Args: agent.Shorten(sch.Prompt, 200), Detail: sch.ID + ": " + err.Error()})
	case err != nil:
		log.Warn("check a schedule's power; it is posted again later", "err", err)
		return
	default:
		added, err := poster.Enqueue(ctx, in)
		if err != nil {
			log.Warn("post a schedule; it is posted again later", "err", err)
			return
		}
		if added {
			log.Info("schedule posted", "message", in.MessageID)
		}
	}
	var next time.Time
	if sch.Kind == schedule.Cron {
		next = s.next(sch, now, log)
	}
	s.finishFiring(ctx, sch, owner, next, log)
}

func noteOr(note string) string {
	if strings.TrimSpace(note) == "" {
		return "(no note was left: go on from the conversation)"
	}
	return note
}

// next is a cron's next firing after this one and after now: a schedule
// that fell due several times while firstmate was down fires once. Zero
// (the schedule is deleted) if its spec no longer reads.
func (s *Scheduler) next(sch Schedule, now time.Time, log *slog.Logger) time.Time {
	// Its own zone, not the channel's now: a cron keeps the zone it was
	// made in.
	c, err := schedule.ParseCron(sch.Cron, s.location(sch.TZ))
	if err != nil {
		log.Error("a stored cron does not read; deleting the schedule", "cron", sch.Cron, "err", err)
		return time.Time{}
	}
	next := c.Next(now)
	if after := c.Next(sch.Due); after.After(next) {
		next = after
	}
	return next
}

func (s *Scheduler) finishFiring(ctx context.Context, sch Schedule, owner string, next time.Time, log *slog.Logger) {
	err := s.store.FinishSchedule(ctx, sch, owner, next)
	switch {
	case err == nil, errors.Is(err, agent.ErrNotFound):
		// Done, or removed meanwhile.
	case errors.Is(err, agent.ErrLeaseLost):
		log.Info("schedule taken over by another replica after its lease ended")
	default:
		log.Warn("finish a schedule; it is looked at again when its lease ends", "err", err)
	}
}

// lookAtJob reports on a job wait's job, and whether the wait is over.
func (s *Scheduler) lookAtJob(ctx context.Context, sch Schedule, now time.Time) (report string, over bool) {
	if s.cfg.Jobs == nil {
		return fmt.Sprintf("job %d cannot be seen here (no job board)", sch.Job), true
	}
	all, err := s.cfg.Jobs.Jobs(ctx, sch.Space)
	var job *tools.Job
	for i := range all {
		if all[i].ID == sch.Job {
			job = &all[i]
		}
	}
	switch {
	case err != nil && now.Before(sch.Until):
		return "", false // look again
	case err != nil:
		return fmt.Sprintf("the wait for job %d ended after %s: its state could not be read (%v)", sch.Job, schedule.Round(sch.Until.Sub(sch.Created)), err), true
	case job == nil:
		return fmt.Sprintf("job %d is no longer on this channel's list of jobs", sch.Job), true
	case schedule.Ended(*job, now):
		return schedule.JobReport(*job, now), true
	case !now.Before(sch.Until):
		return fmt.Sprintf("stopped waiting after %s: %s", schedule.Round(sch.Until.Sub(sch.Created)), schedule.JobReport(*job, now)), true
	}
	return "", false
}

// The chat commands: schedule, schedules, unschedule, timezone.

const scheduleUsage = "Say when, then what to post, like:\n• schedule in 90m check the deploy\n• schedule at 2025-03-04 09:00 post the release notes\n" +
	"• schedule cron \"0 9 * * 1-5\" summarize yesterday's alerts\nTimes are in %s, this channel's time zone (see timezone); a cron fires at most every %s."

// parseScheduleArgs splits a schedule command's arguments into when and
// the prompt.
func parseScheduleArgs(args string) (schedule.When, string) {
	how, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	rest = strings.TrimSpace(rest)
	var w schedule.When
	switch strings.ToLower(how) {
	case "in":
		w.In, rest = cutField(rest)
	case "at":
		w.At, rest = cutField(rest)
		// "2025-03-04 09:00": a date, then a time of day.
		if len(w.At) == len("2006-01-02") && strings.Count(w.At, "-") == 2 {
			if t, more := cutField(rest); strings.Contains(t, ":") {
				w.At, rest = w.At+" "+t, more
			}
		}
	case "cron":
		if q := rest[:min(1, len(rest))]; q == `"` || q == "'" || q == "`" {
			if spec, more, ok := strings.Cut(rest[1:], q); ok {
				w.Cron, rest = spec, more
				break
			}
		}
		fields := strings.Fields(rest)
		n := min(5, len(fields))
		w.Cron = strings.Join(fields[:n], " ")
		for range n {
			_, rest = cutField(rest)
		}
	}
	return w, strings.TrimSpace(rest)
}

// cutField returns s's first field and what follows it.
func cutField(s string) (field, rest string) {
	s = strings.TrimLeft(s, " \t\n")
	i := strings.IndexAny(s, " \t\n")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t\n")
}

// RunCommand implements [agent.CommandRunner]: schedule, schedules,
// unschedule and timezone.
func (s *Scheduler) RunCommand(ctx context.Context, name string, in agent.Inbound, args string) (agent.Notice, error) {
	var text string
	var err error
	switch name {
	case "schedule":
		text, err = s.scheduleCommand(ctx, in, args)
	case "schedules":
		var l schedule.Listing
		if l, err = s.list(ctx, in.Key, in.User); err == nil {
			text = l.String()
		}
	case "unschedule":
		text, err = s.unscheduleCommand(ctx, in, args)
	case "timezone":
		text, err = s.timezoneCommand(ctx, in, args)
	default:
		err = fmt.Errorf("%w command %q: not the scheduler's", agent.ErrInvalid, name)
	}
	return agent.Notice{Text: text}, err
}

func (s *Scheduler) scheduleCommand(ctx context.Context, in agent.Inbound, args string) (string, error) {
	loc, err := s.zone(ctx, in.Key)
	if err != nil {
		return "", err
	}
	usage := fmt.Sprintf(scheduleUsage, loc, schedule.Round(s.cfg.MinInterval))
	w, prompt := parseScheduleArgs(args)
	switch {
	case w == (schedule.When{}):
		return usage, nil
	case prompt == "":
		return "What should I post then? " + usage, nil
	}
	kind := schedule.Once
	if w.Cron != "" {
		kind = schedule.Cron
	}
	sch, err := s.add(ctx, in.Key, in.User, schedule.Plan{Kind: kind, Prompt: prompt, When: w}, loc)
	if errors.Is(err, schedule.ErrBadWhen) || errors.Is(err, ErrScheduleLimit) {
		return capitalize(err.Error()) + ".", nil
	}
	if err != nil {
		return "", err
	}
	return schedule.Made(s.entry(sch, in.Key, in.User, loc)), nil
}

func (s *Scheduler) unscheduleCommand(ctx context.Context, in agent.Inbound, args string) (string, error) {
	id := strings.TrimSpace(args)
	if id == "" {
		return "Say which: unschedule ID (schedules lists them).", nil
	}
	e, err := s.unschedule(ctx, in.Key, in.User, id)
	switch {
	case errors.Is(err, agent.ErrNotFound), errors.Is(err, ErrNotYours):
		return capitalize(err.Error()) + ".", nil
	case err != nil:
		return "", err
	}
	return "Removed " + e.Line(), nil
}

// timezoneCommand shows the channel's time zone or, for an admin, sets it
// (timezone ZONE) or clears it (timezone default).
func (s *Scheduler) timezoneCommand(ctx context.Context, in agent.Inbound, args string) (string, error) {
	name := strings.TrimSpace(args)
	if name == "" {
		cs, err := s.store.Settings(ctx, in.Key.Channel())
		if err != nil {
			return "", fmt.Errorf("read the channel's settings: %w", err)
		}
		return s.describeZone(cs.TimeZone), nil
	}
	if strings.EqualFold(name, "default") {
		name = ""
	}
	g, _ := s.bound()
	if g == nil {
		return "", errors.New("the scheduler is not bound to a gate")
	}
	cs, err := g.SetTimeZone(ctx, in.Key, in.User, name)
	switch {
	case errors.Is(err, agent.ErrNotAdmin):
		return "Only an admin can change this channel's time zone. Send timezone to see it.", nil
	case errors.Is(err, agent.ErrBadTimeZone):
		return capitalize(err.Error()) + ".", nil
	case err != nil:
		return "", err
	}
	return "Saved. " + s.describeZone(cs.TimeZone) + " Schedules made before keep their times; a cron keeps the zone it was made in.", nil
}

// describeZone says which zone a channel whose stored zone is name has.
func (s *Scheduler) describeZone(name string) string {
	if name == "" {
		return fmt.Sprintf("This channel's time zone is %s, the default. Crons and times without an offset are read in it.", s.cfg.Location)
	}
	return fmt.Sprintf("This channel's time zone is %s (the default is %s). Crons and times without an offset are read in it.", s.location(name), s.cfg.Location)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
