package faketelegram

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"time"
)

// Telegram's words for the two conflicts of getUpdates.
const (
	ConflictPoller  = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
	ConflictWebhook = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
)

// updateState is the bot's queue of updates and how they leave it: by
// getUpdates or by a webhook. Guarded by Server.mu.
type updateState struct {
	queue     []Update // not confirmed yet, in update_id order
	nextID    int
	offset    int             // every update_id below it is confirmed
	allowed   map[string]bool // nil: Telegram's default
	poll      *poller         // the getUpdates call waiting, if any
	polling   int             // getUpdates calls waiting
	conflicts int             // getUpdates calls answered 409
	dropped   int             // updates allowed_updates kept from the queue
	arrived   chan struct{}   // closed and replaced when the queue or the webhook changes
	webhook   *Webhook
	hooked    []Delivery
}

// poller is a getUpdates call waiting for updates. kill ends it with 409
// and reason. gone is the request's context: done once the client hung
// up, and a call nobody waits for any more is no conflict.
type poller struct {
	kill   chan struct{}
	reason string
	gone   context.Context
}

// Webhook is the webhook set with setWebhook.
type Webhook struct {
	URL            string
	SecretToken    string
	AllowedUpdates []string
	MaxConnections int
	SetAt          time.Time
	// The last failed delivery, as getWebhookInfo reports it.
	LastErrorDate    time.Time
	LastErrorMessage string
}

// Delivery is one POST of an update to a webhook.
type Delivery struct {
	URL      string
	UpdateID int
	Secret   string // the X-Telegram-Bot-Api-Secret-Token sent; empty if none
	Status   int    // the HTTP status answered; 0 if none
	Err      string // why there was no answer
	At       time.Time
}

func (u *updateState) init(first int) {
	u.nextID = first
	u.arrived = make(chan struct{})
}

// wake tells waiting getUpdates calls and the webhook deliverer that
// something changed.
func (u *updateState) wake() {
	close(u.arrived)
	u.arrived = make(chan struct{})
}

// allows reports whether updates of typ reach the bot. Without
// allowed_updates (or with an empty list) Telegram sends every type but
// chat_member, message_reaction and message_reaction_count.
func (u *updateState) allows(typ string) bool {
	if u.allowed == nil {
		return typ != "chat_member" && typ != "message_reaction" && typ != "message_reaction_count"
	}
	return u.allowed[typ]
}

func (u *updateState) setAllowed(list []string) {
	if len(list) == 0 {
		u.allowed = nil
		return
	}
	u.allowed = map[string]bool{}
	for _, t := range list {
		u.allowed[t] = true
	}
}

// confirm applies getUpdates' offset: a positive offset confirms (and so
// forgets) every update below it; a negative one keeps only the last
// -offset updates.
func (u *updateState) confirm(offset int64) {
	switch {
	case offset > 0:
		u.queue = slices.DeleteFunc(u.queue, func(x Update) bool { return int64(x.UpdateID) < offset })
		if int(offset) > u.offset {
			u.offset = int(offset)
		}
	case offset < 0:
		if keep := int(-offset); keep < len(u.queue) {
			u.queue = slices.Delete(u.queue, 0, len(u.queue)-keep)
		}
		if len(u.queue) > 0 {
			u.offset = max(u.offset, u.queue[0].UpdateID)
		} else {
			u.offset = max(u.offset, u.nextID)
		}
	}
}

func (u *updateState) batch(limit int) []Update {
	out := make([]Update, 0, min(limit, len(u.queue)))
	for _, x := range u.queue[:min(limit, len(u.queue))] {
		out = append(out, x.clone())
	}
	return out
}

// Enqueue queues a hand-made update for the bot and returns it with its
// update_id. An update of a type the bot's allowed_updates excludes is
// not queued, as Telegram never makes it; it is returned with update_id 0.
// The builders ([Server.PrivateMessage]…) make realistic updates and
// queue them.
func (s *Server) Enqueue(u Update) Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enqueueLocked(u)
}

func (s *Server) enqueueLocked(u Update) Update {
	if !s.upd.allows(u.Type()) {
		s.upd.dropped++
		u.UpdateID = 0
		return u
	}
	u.UpdateID = s.upd.nextID
	s.upd.nextID++
	s.upd.queue = append(s.upd.queue, u.clone())
	s.upd.wake()
	s.notifyLocked()
	return u
}

// Pending is the number of updates not confirmed yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.upd.queue)
}

// Offset is the confirmed offset: every update_id below it was confirmed
// by a getUpdates offset (or a webhook delivery) and is forgotten.
func (s *Server) Offset() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.upd.offset
}

// Polling is the number of getUpdates calls waiting for updates now.
func (s *Server) Polling() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.upd.polling
}

// Conflicts is the number of getUpdates calls answered 409 Conflict.
func (s *Server) Conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.upd.conflicts
}

// Filtered is the number of updates not queued because the bot's
// allowed_updates excludes their type.
func (s *Server) Filtered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.upd.dropped
}

// AllowedUpdates is the bot's allowed_updates as last set by getUpdates
// or setWebhook, sorted; nil for Telegram's default.
func (s *Server) AllowedUpdates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.upd.allowed == nil {
		return nil
	}
	out := make([]string, 0, len(s.upd.allowed))
	for t := range s.upd.allowed {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// getUpdates answers a getUpdates call, waiting up to its timeout for
// updates. It is called without s.mu.
func (s *Server) getUpdates(ctx context.Context, req *request) (any, *apiError) {
	p := req.p
	offset, _ := intParam(p, "offset")
	limit := 100
	if n, ok := intParam(p, "limit"); ok && n > 0 {
		limit = int(min(n, 100))
	}
	timeout, _ := intParam(p, "timeout")
	var allowed []string
	raw := jsonParam(p, "allowed_updates")
	if raw != nil {
		if err := json.Unmarshal(raw, &allowed); err != nil {
			return nil, badRequest("can't parse allowed updates JSON object")
		}
	}

	s.mu.Lock()
	if s.upd.webhook != nil {
		s.upd.conflicts++
		s.mu.Unlock()
		return nil, &apiError{code: http.StatusConflict, desc: ConflictWebhook}
	}
	if raw != nil {
		s.upd.setAllowed(allowed)
	}
	s.upd.confirm(offset)
	// Telegram serves one getUpdates at a time: a new call ends the one
	// waiting, which is answered 409.
	s.killPollLocked(ConflictPoller)
	batch := s.upd.batch(limit)
	if len(batch) > 0 || timeout <= 0 {
		s.mu.Unlock()
		return batch, nil
	}
	me := &poller{kill: make(chan struct{}), gone: ctx}
	s.upd.poll = me
	s.upd.polling++
	arrived := s.upd.arrived
	s.notifyLocked()
	s.mu.Unlock()

	defer func() {
		s.mu.Lock()
		if s.upd.poll == me {
			s.upd.poll = nil
		}
		s.upd.polling--
		s.notifyLocked()
		s.mu.Unlock()
	}()
	timer := time.NewTimer(time.Duration(timeout) * time.Second)
	defer timer.Stop()
	for {
		select {
		case <-arrived:
			s.mu.Lock()
			batch = s.upd.batch(limit)
			arrived = s.upd.arrived
			s.mu.Unlock()
			if len(batch) > 0 {
				return batch, nil
			}
		case <-me.kill:
			if ctx.Err() != nil {
				return []Update{}, nil // the client is gone; nobody reads this
			}
			return nil, &apiError{code: http.StatusConflict, desc: me.reason}
		case <-timer.C:
			s.mu.Lock()
			batch = s.upd.batch(limit)
			s.mu.Unlock()
			return batch, nil
		case <-ctx.Done():
			return []Update{}, nil // the client is gone; nobody reads this
		case <-s.done:
			return []Update{}, nil
		}
	}
}

// killPollLocked ends the waiting getUpdates call, if any, with 409 and
// reason, as Telegram does when long polls overlap: only one consumer is
// served. A call whose client already hung up (a poller that stopped) is
// just forgotten, not counted as a conflict. s.mu must be held.
func (s *Server) killPollLocked(reason string) {
	if p := s.upd.poll; p != nil {
		p.reason = reason
		close(p.kill)
		s.upd.poll = nil
		if p.gone.Err() == nil {
			s.upd.conflicts++
		}
	}
}

var secretTokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

func (s *Server) setWebhookLocked(req *request) (any, *apiError) {
	p := req.p
	link := p.Get("url")
	if link == "" {
		return s.deleteWebhookLocked(req)
	}
	u, err := url.Parse(link)
	// Telegram wants https; a local Bot API server, like the fake, also
	// takes http.
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, badRequest("bad webhook: An HTTPS URL must be provided for webhook")
	}
	secret := p.Get("secret_token")
	if secret != "" && !secretTokenRE.MatchString(secret) {
		return nil, badRequest("secret token contains unallowed characters")
	}
	var allowed []string
	if raw := jsonParam(p, "allowed_updates"); raw != nil {
		if err := json.Unmarshal(raw, &allowed); err != nil {
			return nil, badRequest("can't parse allowed updates JSON object")
		}
		s.upd.setAllowed(allowed)
	}
	maxConn := 40
	if n, ok := intParam(p, "max_connections"); ok && n > 0 {
		maxConn = int(min(n, 100))
	}
	if boolParam(p, "drop_pending_updates") {
		s.dropPendingLocked()
	}
	req.description = "Webhook was set"
	if old := s.upd.webhook; old != nil && old.URL == link && old.SecretToken == secret {
		req.description = "Webhook is already set"
	}
	s.upd.webhook = &Webhook{URL: link, SecretToken: secret, AllowedUpdates: allowed, MaxConnections: maxConn, SetAt: time.Now()}
	s.killPollLocked(ConflictWebhook)
	s.upd.wake()
	return true, nil
}

func (s *Server) deleteWebhookLocked(req *request) (any, *apiError) {
	if boolParam(req.p, "drop_pending_updates") {
		s.dropPendingLocked()
	}
	req.description = "Webhook is already deleted"
	if s.upd.webhook != nil {
		req.description = "Webhook was deleted"
	}
	s.upd.webhook = nil
	s.upd.wake()
	return true, nil
}

// dropPendingLocked forgets every update not confirmed yet, as
// drop_pending_updates does. s.mu must be held.
func (s *Server) dropPendingLocked() {
	if n := len(s.upd.queue); n > 0 {
		s.upd.offset = max(s.upd.offset, s.upd.queue[n-1].UpdateID+1)
	}
	s.upd.queue = nil
}

func (s *Server) webhookInfoLocked() map[string]any {
	o := map[string]any{"url": "", "has_custom_certificate": false, "pending_update_count": len(s.upd.queue)}
	if wh := s.upd.webhook; wh != nil {
		o["url"] = wh.URL
		o["max_connections"] = wh.MaxConnections
		o["ip_address"] = "127.0.0.1"
		if len(wh.AllowedUpdates) > 0 {
			o["allowed_updates"] = wh.AllowedUpdates
		}
		if !wh.LastErrorDate.IsZero() {
			o["last_error_date"] = wh.LastErrorDate.Unix()
			o["last_error_message"] = wh.LastErrorMessage
		}
	}
	return o
}

// Webhook returns the webhook set with setWebhook; ok is false if none is.
func (s *Server) Webhook() (wh Webhook, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.upd.webhook == nil {
		return Webhook{}, false
	}
	wh = *s.upd.webhook
	wh.AllowedUpdates = slices.Clone(wh.AllowedUpdates)
	return wh, true
}

// Deliveries returns the webhook deliveries, by WithWebhookDelivery and
// by DeliverWebhook, in order.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.upd.hooked)
}

// deliverLoop posts queued updates to the webhook while one is set, one
// at a time and in order, as Telegram does; it runs until Close.
func (s *Server) deliverLoop(ctx context.Context) {
	for {
		s.mu.Lock()
		var (
			next         Update
			have         bool
			link, secret string
		)
		if wh := s.upd.webhook; wh != nil && len(s.upd.queue) > 0 {
			next, have = s.upd.queue[0].clone(), true
			link, secret = wh.URL, wh.SecretToken
		}
		arrived := s.upd.arrived
		s.mu.Unlock()
		if !have {
			select {
			case <-arrived:
				continue
			case <-s.done:
				return
			}
		}
		d := s.post(ctx, link, next, secret)
		ok := d.Status >= 200 && d.Status < 300
		s.mu.Lock()
		s.upd.hooked = append(s.upd.hooked, d)
		if ok {
			s.upd.queue = slices.DeleteFunc(s.upd.queue, func(x Update) bool { return x.UpdateID == next.UpdateID })
			s.upd.offset = max(s.upd.offset, next.UpdateID+1)
		} else if wh := s.upd.webhook; wh != nil && wh.URL == link {
			wh.LastErrorDate = d.At
			wh.LastErrorMessage = d.Err
			if d.Status != 0 {
				wh.LastErrorMessage = fmt.Sprintf("Wrong response from the webhook: %d %s", d.Status, http.StatusText(d.Status))
			}
		}
		s.notifyLocked()
		s.mu.Unlock()
		if !ok {
			t := time.NewTimer(s.hookRetry)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return
			}
		}
	}
}

// DeliverOption changes how DeliverWebhook sends an update.
type DeliverOption func(*deliverConfig)

type deliverConfig struct {
	wrongSecret, noSecret bool
}

// WrongSecret sends a secret token other than the one given: a forged
// request.
func WrongSecret() DeliverOption { return func(c *deliverConfig) { c.wrongSecret = true } }

// NoSecret sends no X-Telegram-Bot-Api-Secret-Token header.
func NoSecret() DeliverOption { return func(c *deliverConfig) { c.noSecret = true } }

// DeliverWebhook POSTs update to a webhook endpoint as Telegram does (a
// JSON body, secret in X-Telegram-Bot-Api-Secret-Token unless empty) and
// returns the HTTP status answered. An update without an update_id is
// given the next one. It does not touch the queue: to deliver what the
// bot would get, use the update a builder returned.
func (s *Server) DeliverWebhook(ctx context.Context, endpoint string, update Update, secret string, opts ...DeliverOption) (int, error) {
	var cfg deliverConfig
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.noSecret:
		secret = ""
	case cfg.wrongSecret:
		secret += "-forged"
	}
	if update.UpdateID == 0 {
		s.mu.Lock()
		update.UpdateID = s.upd.nextID
		s.upd.nextID++
		s.mu.Unlock()
	}
	d := s.post(ctx, endpoint, update, secret)
	s.mu.Lock()
	s.upd.hooked = append(s.upd.hooked, d)
	s.notifyLocked()
	s.mu.Unlock()
	if d.Status == 0 {
		return 0, fmt.Errorf("faketelegram: deliver to %s: %s", endpoint, d.Err)
	}
	return d.Status, nil
}

// post sends one update to a webhook.
func (s *Server) post(ctx context.Context, endpoint string, u Update, secret string) Delivery {
	d := Delivery{URL: endpoint, UpdateID: u.UpdateID, Secret: secret, At: time.Now()}
	body, err := json.Marshal(u)
	if err != nil {
		d.Err = err.Error()
		return d
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		d.Err = err.Error()
		return d
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		d.Err = err.Error()
		return d
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	d.Status = resp.StatusCode
	return d
}
