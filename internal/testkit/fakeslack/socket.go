package fakeslack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Envelope is one Socket Mode envelope as the fake sent it. An envelope
// that is not acked in time is sent again as a new envelope, with its own
// ID, retry_attempt one higher and the same payload (so the same
// event_id): a client must deduplicate on event_id, not envelope_id.
type Envelope struct {
	ID           string
	Type         string // events_api, slash_commands or interactive
	RetryAttempt int
	RetryReason  string
	Payload      json.RawMessage
	// First is the ID of the first envelope of the delivery, what
	// SendEvent returned.
	First  string
	SentAt time.Time
	Conn   int // the connection it was written to, counted from 1
}

// Ack is an acknowledgement a client sent back: {"envelope_id":…}.
type Ack struct {
	EnvelopeID   string
	First        string // the first envelope of its delivery; empty for an unknown envelope
	RetryAttempt int    // of the envelope acked
	Payload      json.RawMessage
	At           time.Time
	Latency      time.Duration // from sending the envelope to its ack
	Conn         int
}

// socketState is the Socket Mode side. Guarded by Server.mu.
type socketState struct {
	tickets    map[string]bool
	conns      []*wsConn // open connections, oldest first
	count      int       // connections ever accepted
	pongs      int
	deliveries []*delivery
	byEnvelope map[string]*sent
	pending    []*delivery // waiting for a connection
	next       int         // WithSpread: the turn of the next envelope
	envelopes  []Envelope
	acks       []Ack
}

// envelopeFrame is an envelope as the Socket Mode connection carries it.
// Its fields are in the order of their JSON names, as for eventCallback.
type envelopeFrame struct {
	AcceptsResponsePayload bool            `json:"accepts_response_payload"`
	EnvelopeID             string          `json:"envelope_id"`
	Payload                json.RawMessage `json:"payload"`
	RetryAttempt           int             `json:"retry_attempt"`
	RetryReason            string          `json:"retry_reason"`
	Type                   string          `json:"type"`
}

// delivery is one event, command or interaction, sent until acked.
type delivery struct {
	first    string
	typ      string
	payload  json.RawMessage
	accepts  bool
	attempts int // envelopes written
	ack      *Ack
	timer    *time.Timer
}

type sent struct {
	env *Envelope
	d   *delivery
}

type wsConn struct {
	n    int
	ws   *websocket.Conn
	wmu  sync.Mutex
	done chan struct{}
	// Guarded by Server.mu.
	ready bool // hello sent
	dead  bool
}

func (st *socketState) init() {
	st.tickets = map[string]bool{}
	st.byEnvelope = map[string]*sent{}
}

// stopLocked stops the retry timers and returns the open connections for
// Close to cut. s.mu must be held.
func (st *socketState) stopLocked() []*wsConn {
	for _, d := range st.deliveries {
		if d.timer != nil {
			d.timer.Stop()
		}
	}
	return slices.Clone(st.conns)
}

func (c *wsConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// connectionsOpenLocked answers apps.connections.open with a one-time
// WebSocket URL. s.mu must be held.
func (s *Server) connectionsOpenLocked() object {
	ticket := uuid()
	s.sock.tickets[ticket] = true
	host := strings.TrimPrefix(s.srv.URL, "http://")
	return object{"url": "ws://" + host + linkPath + "?ticket=" + ticket + "&app_id=" + s.appID}
}

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	valid := s.sock.tickets[ticket] && !s.closed
	delete(s.sock.tickets, ticket)
	s.mu.Unlock()
	if !valid {
		http.Error(w, "invalid or used ticket", http.StatusUnauthorized)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ws.Close()
		return
	}
	s.sock.count++
	c := &wsConn{n: s.sock.count, ws: ws, done: make(chan struct{})}
	s.sock.conns = append(s.sock.conns, c)
	open := len(s.sock.conns)
	// A hijacked connection is not waited for by httptest.Server.Close;
	// Close waits for it here.
	s.wg.Add(2)
	s.notifyLocked()
	s.mu.Unlock()
	defer s.wg.Done()
	s.log("socket mode connection", "conn", c.n)

	ws.SetPongHandler(func(string) error {
		s.mu.Lock()
		s.sock.pongs++
		s.notifyLocked()
		s.mu.Unlock()
		return nil
	})
	go s.ping(c)
	defer func() {
		s.mu.Lock()
		c.dead = true
		s.sock.conns = slices.DeleteFunc(s.sock.conns, func(o *wsConn) bool { return o == c })
		s.notifyLocked()
		s.mu.Unlock()
		close(c.done)
		_ = ws.Close()
	}()

	hello, _ := json.Marshal(object{
		"type": "hello", "num_connections": open,
		"debug_info":      object{"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": object{"app_id": s.appID},
	})
	if c.write(hello) != nil {
		return
	}
	s.mu.Lock()
	c.ready = true
	pending := s.sock.pending
	s.sock.pending = nil
	s.notifyLocked()
	s.mu.Unlock()
	for _, d := range pending {
		s.send(d)
	}

	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		s.receive(c, data)
	}
}

// ping sends WebSocket pings as Slack does; slack-go's client counts on
// them to know the connection is alive.
func (s *Server) ping(c *wsConn) {
	defer s.wg.Done()
	if s.pingInterval <= 0 {
		return
	}
	t := time.NewTicker(s.pingInterval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-c.done:
			return
		case <-t.C:
			if c.ws.WriteControl(websocket.PingMessage, fmt.Appendf(nil, "ping-%d", n), time.Now().Add(5*time.Second)) != nil {
				return
			}
		}
	}
}

// receive records a frame from the client: an ack.
func (s *Server) receive(c *wsConn, data []byte) {
	var f struct {
		EnvelopeID string          `json:"envelope_id"`
		Payload    json.RawMessage `json:"payload"`
	}
	if json.Unmarshal(data, &f) != nil || f.EnvelopeID == "" {
		s.log("socket mode frame ignored", "conn", c.n, "frame", string(data))
		return
	}
	now := time.Now()
	ack := Ack{EnvelopeID: f.EnvelopeID, Payload: f.Payload, At: now, Conn: c.n}
	s.mu.Lock()
	if e := s.sock.byEnvelope[f.EnvelopeID]; e != nil {
		ack.First, ack.RetryAttempt, ack.Latency = e.d.first, e.env.RetryAttempt, now.Sub(e.env.SentAt)
		if e.d.ack == nil {
			e.d.ack = &ack
			if e.d.timer != nil {
				e.d.timer.Stop()
			}
		}
	}
	s.sock.acks = append(s.sock.acks, ack)
	s.notifyLocked()
	s.mu.Unlock()
	s.log("socket mode ack", "envelope", f.EnvelopeID, "latency", ack.Latency)
}

// deliver starts delivering a payload and returns the first envelope's ID.
func (s *Server) deliver(typ string, payload json.RawMessage, accepts bool) string {
	d := &delivery{first: uuid(), typ: typ, payload: payload, accepts: accepts}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ""
	}
	s.sock.deliveries = append(s.sock.deliveries, d)
	s.mu.Unlock()
	s.send(d)
	return d.first
}

// send writes the next envelope of d to the newest ready connection (with
// WithSpread, to each in turn), or queues d until a client connects. A
// write that fails (the connection just died) is tried on another
// connection.
func (s *Server) send(d *delivery) {
	for {
		s.mu.Lock()
		if s.closed || d.ack != nil {
			s.mu.Unlock()
			return
		}
		var ready []*wsConn
		for _, o := range s.sock.conns {
			if o.ready && !o.dead {
				ready = append(ready, o)
			}
		}
		var c *wsConn
		switch {
		case len(ready) == 0:
		case s.spread:
			c = ready[s.sock.next%len(ready)]
			s.sock.next++
		default:
			c = ready[len(ready)-1]
		}
		if c == nil {
			s.sock.pending = append(s.sock.pending, d)
			s.mu.Unlock()
			return
		}
		env := &Envelope{ID: d.first, Type: d.typ, RetryAttempt: d.attempts, Payload: d.payload, First: d.first, SentAt: time.Now(), Conn: c.n}
		if d.attempts > 0 {
			env.ID, env.RetryReason = uuid(), "timeout"
		}
		frame, _ := json.Marshal(envelopeFrame{
			EnvelopeID: env.ID, Type: env.Type, Payload: env.Payload,
			AcceptsResponsePayload: d.accepts, RetryAttempt: env.RetryAttempt, RetryReason: env.RetryReason,
		})
		// Registered before the write: the ack can come back before
		// Write returns.
		s.sock.byEnvelope[env.ID] = &sent{env: env, d: d}
		s.mu.Unlock()

		err := c.write(frame)

		s.mu.Lock()
		if err != nil {
			delete(s.sock.byEnvelope, env.ID)
			c.dead = true
			s.mu.Unlock()
			continue
		}
		d.attempts++
		s.sock.envelopes = append(s.sock.envelopes, *env)
		if d.ack == nil && !s.closed {
			d.timer = time.AfterFunc(s.ackTimeout, func() { s.retry(d) })
		}
		s.notifyLocked()
		s.mu.Unlock()
		s.log("socket mode envelope", "type", env.Type, "envelope", env.ID, "retry_attempt", env.RetryAttempt, "conn", c.n)
		return
	}
}

// retry sends d again when its ack did not come in time.
func (s *Server) retry(d *delivery) {
	s.mu.Lock()
	if s.closed || d.ack != nil || d.attempts > s.maxRetries {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	s.send(d)
}

// Envelopes returns every envelope sent, retries included, in order.
func (s *Server) Envelopes() []Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sock.envelopes)
}

// Acks returns every ack received, in order of arrival, duplicates and
// acks of unknown envelopes included.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sock.acks)
}

// WaitAck waits until the delivery that envelopeID belongs to is acked
// (by that envelope or a retry of it) and returns the ack; ok is false if
// timeout passed first.
func (s *Server) WaitAck(envelopeID string, timeout time.Duration) (ack Ack, ok bool) {
	ok = s.WaitFor(timeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if d := s.deliveryLocked(envelopeID); d != nil && d.ack != nil {
			ack = *d.ack
			return true
		}
		return false
	})
	return ack, ok
}

// deliveryLocked finds the delivery of an envelope, sent or still
// queued. s.mu must be held.
func (s *Server) deliveryLocked(envelopeID string) *delivery {
	if e := s.sock.byEnvelope[envelopeID]; e != nil {
		return e.d
	}
	for _, d := range s.sock.deliveries {
		if d.first == envelopeID {
			return d
		}
	}
	return nil
}

// Connections returns how many Socket Mode connections were accepted
// since the start, reconnections included.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sock.count
}

// OpenConnections returns how many Socket Mode connections are open.
func (s *Server) OpenConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sock.conns)
}

// WaitConnections waits until at least n connections were accepted and
// one is open and has been sent hello.
func (s *Server) WaitConnections(n int, timeout time.Duration) bool {
	return s.WaitFor(timeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.sock.count < n {
			return false
		}
		return slices.ContainsFunc(s.sock.conns, func(c *wsConn) bool { return c.ready && !c.dead })
	})
}

// Pongs returns how many pongs clients sent back to the fake's pings.
func (s *Server) Pongs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sock.pongs
}

// DropConnections cuts every open Socket Mode connection without a close
// frame, as a network failure or a Slack restart does. Unacked envelopes
// are sent again, on the next connection, when their ack time runs out.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := slices.Clone(s.sock.conns)
	for _, c := range conns {
		c.dead = true
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.ws.NetConn().Close()
	}
}

// Disconnect sends {"type":"disconnect","reason":reason} on every open
// connection, as Slack does before it refreshes one (reason
// "refresh_requested", or "warning" ahead of it). slack-go's client then
// closes the connection and opens a new one. New envelopes go to the new
// connection only.
func (s *Server) Disconnect(reason string) {
	frame, _ := json.Marshal(object{"type": "disconnect", "reason": reason, "debug_info": object{"host": "applink-fake"}})
	s.mu.Lock()
	conns := slices.Clone(s.sock.conns)
	for _, c := range conns {
		c.ready = false
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.write(frame)
	}
}
