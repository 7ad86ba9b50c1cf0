package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/firstmate/firstmate/agent"
)

// PollLease is a named lease with a TTL, shared by the replicas of one
// bot (agent.Store has these methods): the holder of the poll lease is
// the one replica that long-polls.
type PollLease interface {
	// TryLease takes or renews the lease name for owner, for ttl, and
	// reports whether owner holds it.
	TryLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	// DropLease gives the lease up if owner holds it.
	DropLease(ctx context.Context, name, owner string) error
}

// leaseTiming is how the poll lease is held: tests shorten it.
type leaseTiming struct {
	ttl   time.Duration // how long a hold lasts without renewal
	renew time.Duration // the holder renews this often; also a renewal's time limit
	retry time.Duration // a standby tries to take the lease this often
}

// The holder renews twice (with each renewal's time limit) within the
// TTL, so one slow store call does not cost the lease; a standby takes
// over at most retry after the holder's lease expired or was dropped.
var defaultLeaseTiming = leaseTiming{ttl: 15 * time.Second, renew: 5 * time.Second, retry: 3 * time.Second}

// errLeaseLost ends a hold: the lease went to another replica, or the
// store could not say (no lease, no poll).
var errLeaseLost = errors.New("telegram poll lease lost")

// Polling reports whether this replica receives updates by long polling
// now: always while Run polls without a PollLease; with one, only while
// it holds the lease (false: a standby). With a webhook it is false, and
// every replica serves the webhook.
func (a *Adapter) Polling() bool { return a.polling.Load() }

// pollLeaseName names the poll lease by the bot's ID, never its token
// (a lease name is stored and logged).
func (a *Adapter) pollLeaseName() string {
	return "telegram-poll:" + strconv.FormatInt(a.norm.me.ID, 10)
}

// pollLeased polls while this replica holds the poll lease, and stands by
// while another does, until ctx ends; then it gives the lease up, so a
// standby takes over at once instead of when the TTL runs out.
func (a *Adapter) pollLeased(ctx context.Context, d agent.Submitter) error {
	name := a.pollLeaseName()
	defer func() {
		// ctx has ended: the drop gets a short time of its own.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.lease.renew)
		defer cancel()
		if err := a.cfg.PollLease.DropLease(dctx, name, a.cfg.Owner); err != nil {
			a.log.Warn("telegram poll lease not dropped; a standby takes over when it expires", "lease", name, "err", err)
		}
	}()
	p := &poller{a: a, d: d}
	standby, failing := false, false
	for ctx.Err() == nil {
		held, err := a.tryLease(ctx, name)
		if ctx.Err() != nil {
			break
		}
		switch {
		case err != nil && !failing:
			a.log.Warn("telegram poll lease unavailable; not polling until it is", "lease", name, "err", err)
			failing = true
		case err == nil && failing:
			a.log.Info("telegram poll lease available again", "lease", name)
			failing = false
		}
		if !held {
			if !standby && err == nil {
				a.log.Info("telegram: standby poller", "lease", name, "owner", a.cfg.Owner)
				standby = true
			}
			if !sleep(ctx, a.lease.retry) {
				break
			}
			continue
		}
		standby = false
		a.log.Info("telegram: polling", "lease", name, "owner", a.cfg.Owner)
		if err := a.pollHeld(ctx, p, name); err != nil {
			return err
		}
	}
	return nil
}

// tryLease takes or renews the poll lease within the renewal period, so a
// hung store call cannot outlast the hold.
func (a *Adapter) tryLease(ctx context.Context, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, a.lease.renew)
	defer cancel()
	return a.cfg.PollLease.TryLease(ctx, name, a.cfg.Owner, a.lease.ttl)
}

// pollHeld polls while the lease is held. A goroutine renews it; when a
// renewal fails or finds the lease gone it ends held, which ends the long
// poll in flight, so this replica has stopped polling before the lease
// can expire and another replica's first getUpdates. When ctx ends
// instead, the updates submitted are confirmed to Telegram before the
// lease is dropped, so the next holder does not get them again.
func (a *Adapter) pollHeld(ctx context.Context, p *poller, name string) error {
	held, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	var wg sync.WaitGroup
	wg.Go(func() { a.renewLease(held, lose, name) })
	a.polling.Store(true)
	err := p.poll(ctx, held)
	a.polling.Store(false)
	lost := errors.Is(context.Cause(held), errLeaseLost)
	lose(nil)
	wg.Wait()
	if lost {
		return err
	}
	if ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.lease.renew)
		defer cancel()
		p.confirm(cctx)
	}
	return err
}

// renewLease renews the poll lease every renewal period until held ends,
// and ends held with errLeaseLost when the lease is gone or the store
// fails (fail safe: a replica that cannot tell whether it holds the lease
// does not poll).
func (a *Adapter) renewLease(held context.Context, lose context.CancelCauseFunc, name string) {
	t := time.NewTicker(a.lease.renew)
	defer t.Stop()
	for {
		select {
		case <-held.Done():
			return
		case <-t.C:
		}
		ok, err := a.tryLease(held, name)
		if held.Err() != nil {
			return
		}
		if err != nil {
			a.log.Warn("telegram poll lease not renewed; polling stops", "lease", name, "err", err)
			lose(errLeaseLost)
			return
		}
		if !ok {
			a.log.Warn("telegram poll lease held by another replica; polling stops", "lease", name)
			lose(errLeaseLost)
			return
		}
	}
}

// poller is the long-polling loop and what it keeps across holds of the
// poll lease.
type poller struct {
	a *Adapter
	d agent.Submitter
	// offset is the next update_id to ask for: every update below it was
	// submitted. sent is the offset Telegram was last given: updates below
	// it are confirmed.
	offset, sent int64
	conflictAt   time.Time // the last 409 Conflict
}

// conflictQuiet is how long without a 409 Conflict before the next one is
// logged at warn again: a fight with another poller is one line, not a
// line per round.
const conflictQuiet = 5 * time.Minute

// poll receives updates until held ends: ctx, or with a poll lease a
// child of ctx that ends when the lease is lost. getUpdates runs under
// held, so a lost lease ends a long poll at once; updates in hand are
// submitted under ctx. The offset moves past an update only after Submit
// returned for it, so a crash in between means Telegram sends it again
// (to this replica or the next poller); the dispatcher's dedup makes that
// one answer.
func (p *poller) poll(ctx, held context.Context) error {
	a := p.a
	allowed, _ := json.Marshal(allowedUpdates)
	backoff := time.Second
	for held.Err() == nil {
		var updates []json.RawMessage
		params := tgbotapi.Params{
			"offset":          strconv.FormatInt(p.offset, 10),
			"timeout":         strconv.Itoa(int(a.cfg.PollTimeout / time.Second)),
			"allowed_updates": string(allowed),
		}
		err := a.call(held, "getUpdates", params, &updates)
		if err != nil {
			if held.Err() != nil {
				return nil
			}
			wait := backoff
			if e, ok := apiError(err); ok {
				switch {
				case e.Code == http.StatusConflict:
					// Another getUpdates consumer: a process outside the
					// lease (an older version, a copy run by hand) or a
					// webhook. Back off and let it be.
					if time.Since(p.conflictAt) > conflictQuiet {
						a.log.Warn("telegram getUpdates conflict: another process polls with this bot token (or a webhook is set); backing off", "err", e.Message)
					} else {
						a.log.Debug("telegram getUpdates conflict", "err", e.Message)
					}
					p.conflictAt = time.Now()
				case e.RetryAfter > 0:
					wait = time.Duration(e.RetryAfter) * time.Second
				case e.Code == http.StatusUnauthorized:
					return fmt.Errorf("telegram: the bot token was refused (revoked?): %s", e.Message)
				default:
					a.log.Warn("telegram getUpdates failed", "err", err)
				}
			} else {
				a.log.Warn("telegram getUpdates failed", "err", err)
			}
			if !sleep(held, wait) {
				return nil
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		p.sent = max(p.sent, p.offset)
		backoff = time.Second
		for _, raw := range updates {
			var u update
			if err := json.Unmarshal(raw, &u); err != nil {
				a.log.Warn("telegram update not understood; skipped", "err", err)
				a.answerUnreadable(ctx, raw)
				p.offset = max(p.offset, updateID(raw)+1)
				continue // it can never be read; do not get stuck on it
			}
			for {
				err := a.handle(ctx, p.d, &u)
				if err == nil {
					break
				}
				if ctx.Err() != nil || errors.Is(err, agent.ErrShutdown) {
					return nil // not confirmed: it comes again after the restart
				}
				a.log.Error("telegram update not recorded; retrying", "update", u.UpdateID, "err", err)
				if !sleep(held, time.Second) {
					return nil // not confirmed: the next poller gets it
				}
			}
			p.offset = u.UpdateID + 1
		}
	}
	return nil
}

// confirm tells Telegram that the updates submitted since the last
// getUpdates are taken (a getUpdates that does not wait), so that the
// replica polling next does not get them again.
func (p *poller) confirm(ctx context.Context) {
	if p.offset <= p.sent {
		return
	}
	params := tgbotapi.Params{"offset": strconv.FormatInt(p.offset, 10), "timeout": "0", "limit": "1"}
	if err := p.a.call(ctx, "getUpdates", params, nil); err != nil {
		p.a.log.Warn("telegram offset not confirmed; the next poller gets some updates again", "err", err)
		return
	}
	p.sent = p.offset
}
