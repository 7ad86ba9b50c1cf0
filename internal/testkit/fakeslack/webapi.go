package fakeslack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Call is one Web API call as the fake received and answered it.
type Call struct {
	Method string
	// Params are the form fields, query parameters or top-level JSON
	// fields of the request, without the token. A JSON value that is not
	// a string is kept as its JSON text, so blocks read the same whether
	// they came in a form or in JSON.
	Params url.Values
	Body   []byte // the raw request body
	Token  string
	At     time.Time
	Status int    // the HTTP status answered
	Error  string // the error code answered; empty when ok
}

// OK reports whether the call was answered {"ok":true}.
func (c Call) OK() bool { return c.Status == http.StatusOK && c.Error == "" }

// webState is the Web API's record and scripted faults. Guarded by Server.mu.
type webState struct {
	calls  []Call
	limits map[string]*rateLimit
	faults map[string]*fault
}

type rateLimit struct {
	calls      int       // answer 429 to this many more calls
	until      time.Time // or to every call before this time
	retryAfter time.Duration
}

type fault struct {
	code   string // the error answered with HTTP 200, or
	status int    // the HTTP status answered
	calls  int
}

func (w *webState) init() {
	w.limits = map[string]*rateLimit{}
	w.faults = map[string]*fault{}
}

// Calls returns the recorded Web API calls of method, in order; every call
// if method is empty. Rejected calls (bad token, 429, unknown method) are
// recorded too.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.web.calls {
		if method == "" || c.Method == method {
			c.Params = cloneValues(c.Params)
			out = append(out, c)
		}
	}
	return out
}

// Count returns how many calls of method were received; of every method
// if method is empty.
func (s *Server) Count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.web.calls {
		if method == "" || c.Method == method {
			n++
		}
	}
	return n
}

// RateLimitNext answers the next n calls of method with HTTP 429 and a
// Retry-After header of retryAfter, rounded up to whole seconds as Slack
// sends it (slack-go reads it as *slack.RateLimitedError). A retryAfter
// of zero sends "Retry-After: 0", which keeps tests fast. It replaces an
// earlier limit on method; n = 0 lifts it.
func (s *Server) RateLimitNext(method string, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.limits[method] = &rateLimit{calls: n, retryAfter: retryAfter}
}

// RateLimitFor answers every call of method with HTTP 429 for d from now.
func (s *Server) RateLimitFor(method string, d, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.limits[method] = &rateLimit{until: time.Now().Add(d), retryAfter: retryAfter}
}

// FailNext answers the next n calls of method with {"ok":false,"error":code}
// (HTTP 200, as Slack answers errors), before the method does anything.
func (s *Server) FailNext(method string, n int, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.faults[method] = &fault{code: code, calls: n}
}

// FailNextStatus answers the next n calls of method with an HTTP status,
// such as 500 or 503 in an outage, and a body that is not JSON.
func (s *Server) FailNextStatus(method string, n int, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.faults[method] = &fault{status: status, calls: n}
}

// apiCall is a Web API request being handled.
type apiCall struct {
	p     url.Values
	after []func() // run once s.mu is released: echoed events
}

type object = map[string]any

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, method string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return // the client went away
	}
	params, token, perr := parseParams(r, body)
	call := Call{Method: method, Params: params, Body: body, Token: token, At: time.Now(), Status: http.StatusOK}
	c := &apiCall{p: params}
	var (
		reply      object
		retryAfter time.Duration
	)

	s.mu.Lock()
	switch {
	case perr != nil:
		call.Error = "invalid_form_data"
	default:
		call.Status, call.Error, retryAfter = s.gateLocked(method, token)
		if call.Status == http.StatusOK && call.Error == "" {
			reply, call.Error = s.handleLocked(method, c)
		}
	}
	s.web.calls = append(s.web.calls, call)
	s.notifyLocked()
	s.mu.Unlock()

	s.log("web api call", "method", method, "status", call.Status, "error", call.Error)
	switch {
	case call.Status == http.StatusTooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
		writeJSON(w, call.Status, object{"ok": false, "error": "ratelimited"})
	case call.Status != http.StatusOK:
		// Slack's front end answers outages with HTML.
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(call.Status)
		fmt.Fprintf(w, "<html><body>%d %s</body></html>", call.Status, http.StatusText(call.Status))
	case call.Error != "":
		o := object{"ok": false, "error": call.Error}
		if call.Error == "unknown_method" {
			o["req_method"] = method
		}
		writeJSON(w, http.StatusOK, o)
	default:
		if reply == nil {
			reply = object{}
		}
		reply["ok"] = true
		writeJSON(w, http.StatusOK, reply)
	}
	for _, f := range c.after {
		f()
	}
}

// parseParams reads the parameters of a Web API request as Slack does:
// query, form body or JSON body, and the token from the Authorization
// header or the token field.
func parseParams(r *http.Request, body []byte) (url.Values, string, error) {
	p := cloneValues(r.URL.Query())
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		if t := bytes.TrimSpace(body); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(t, &m); err != nil {
				return p, "", err
			}
			for k, raw := range m {
				var str string
				if json.Unmarshal(raw, &str) == nil {
					p.Set(k, str)
				} else {
					p.Set(k, string(raw))
				}
			}
		}
	case "multipart/form-data":
		// Slack accepts it; slack-go uses it only to upload to an upload URL.
	default:
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return p, "", err
		}
		for k, v := range form {
			p[k] = append(p[k], v...)
		}
	}
	token := p.Get("token")
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		token = a
	}
	p.Del("token")
	return p, token, nil
}

// gateLocked answers what comes before a method runs: whether the method
// exists, the token, a scripted rate limit or fault. s.mu must be held.
func (s *Server) gateLocked(method, token string) (status int, code string, retryAfter time.Duration) {
	if !knownMethod(method) {
		return http.StatusOK, "unknown_method", 0
	}
	wantApp := method == "apps.connections.open"
	switch {
	case token == "":
		return http.StatusOK, "not_authed", 0
	case token == s.appToken && !wantApp, token == s.botToken && wantApp:
		return http.StatusOK, "not_allowed_token_type", 0
	case token != s.appToken && token != s.botToken:
		return http.StatusOK, "invalid_auth", 0
	}
	if l := s.web.limits[method]; l != nil {
		if l.calls > 0 {
			l.calls--
			return http.StatusTooManyRequests, "ratelimited", l.retryAfter
		}
		if time.Now().Before(l.until) {
			return http.StatusTooManyRequests, "ratelimited", l.retryAfter
		}
	}
	if f := s.web.faults[method]; f != nil && f.calls > 0 {
		f.calls--
		if f.status != 0 {
			return f.status, "", 0
		}
		return http.StatusOK, f.code, 0
	}
	return http.StatusOK, "", 0
}

func knownMethod(m string) bool {
	switch m {
	case "auth.test", "apps.connections.open",
		"chat.postMessage", "chat.update", "chat.postEphemeral", "chat.delete",
		"chat.startStream", "chat.appendStream", "chat.stopStream",
		"reactions.add", "reactions.remove",
		"conversations.replies", "conversations.info", "users.info",
		"assistant.threads.setStatus", "views.open",
		"files.getUploadURLExternal", "files.completeUploadExternal":
		return true
	}
	return false
}

// handleLocked runs a method. s.mu must be held.
func (s *Server) handleLocked(method string, c *apiCall) (object, string) {
	switch method {
	case "auth.test":
		return object{
			"url": "https://" + s.teamDomain + ".slack.com/", "team": s.teamDomain, "user": s.name,
			"team_id": s.teamID, "user_id": s.botUserID, "bot_id": s.botID, "is_enterprise_install": false,
		}, ""
	case "apps.connections.open":
		return s.connectionsOpenLocked(), ""
	case "chat.postMessage":
		return s.postMessageLocked(c)
	case "chat.update":
		return s.updateLocked(c)
	case "chat.postEphemeral":
		return s.postEphemeralLocked(c)
	case "chat.delete":
		return s.deleteLocked(c)
	case "chat.startStream", "chat.appendStream", "chat.stopStream":
		return s.streamLocked(method, c)
	case "reactions.add", "reactions.remove":
		return s.reactLocked(method == "reactions.add", c.p)
	case "conversations.replies":
		return s.repliesLocked(c.p)
	case "conversations.info":
		ch, ok := s.channelLocked(c.p.Get("channel"))
		if !ok {
			return nil, "channel_not_found"
		}
		return object{"channel": s.wireChannel(ch)}, ""
	case "users.info":
		return s.usersInfoLocked(c.p)
	case "assistant.threads.setStatus":
		return s.setStatusLocked(c.p)
	case "views.open":
		return s.viewsOpenLocked(c.p)
	case "files.getUploadURLExternal":
		return s.uploadURLLocked(c.p)
	case "files.completeUploadExternal":
		return s.completeUploadLocked(c)
	}
	return nil, "unknown_method"
}

func (s *Server) repliesLocked(p url.Values) (object, string) {
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return nil, "channel_not_found"
	}
	m := s.store.get(ch.ID, p.Get("ts"))
	if m == nil || m.Deleted {
		return nil, "thread_not_found"
	}
	parent := m.TS
	if m.ThreadTS != "" {
		parent = m.ThreadTS
	}
	inclusive := p.Get("inclusive") == "1" || p.Get("inclusive") == "true"
	var msgs []*Message
	for _, t := range s.store.thread(ch.ID, parent) {
		if o := p.Get("oldest"); o != "" && (compareTS(t.TS, o) < 0 || !inclusive && t.TS == o) {
			continue
		}
		if l := p.Get("latest"); l != "" && (compareTS(t.TS, l) > 0 || !inclusive && t.TS == l) {
			continue
		}
		msgs = append(msgs, t)
	}
	start, _ := strconv.Atoi(p.Get("cursor"))
	start = min(max(start, 0), len(msgs))
	limit, _ := strconv.Atoi(p.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	end := min(start+limit, len(msgs))
	out := make([]object, 0, end-start)
	for _, t := range msgs[start:end] {
		out = append(out, s.wireMessageLocked(t))
	}
	reply := object{"messages": out, "has_more": end < len(msgs)}
	if end < len(msgs) {
		reply["response_metadata"] = object{"next_cursor": strconv.Itoa(end)}
	}
	return reply, ""
}

func (s *Server) usersInfoLocked(p url.Values) (object, string) {
	if list := p.Get("users"); list != "" {
		var out []object
		for id := range strings.SplitSeq(list, ",") {
			u, ok := s.users[strings.TrimSpace(id)]
			if !ok {
				return nil, "user_not_found"
			}
			out = append(out, s.wireUser(u))
		}
		return object{"users": out}, ""
	}
	u, ok := s.users[p.Get("user")]
	if !ok {
		return nil, "user_not_found"
	}
	return object{"user": s.wireUser(u)}, ""
}

func (s *Server) setStatusLocked(p url.Values) (object, string) {
	ch, ok := s.channelLocked(p.Get("channel_id"))
	if !ok {
		return nil, "channel_not_found"
	}
	if p.Get("thread_ts") == "" {
		return nil, "invalid_arguments"
	}
	st := Status{Channel: ch.ID, ThreadTS: p.Get("thread_ts"), Status: p.Get("status"), At: time.Now()}
	if lm := p.Get("loading_messages"); lm != "" {
		st.LoadingMessages = strings.Split(lm, ",")
	}
	s.store.statuses = append(s.store.statuses, st)
	return nil, ""
}

// wireMessageLocked is a message as the Web API returns it. s.mu must be held.
func (s *Server) wireMessageLocked(m *Message) object {
	o := object{"type": "message", "ts": m.TS, "text": m.Text, "team": s.teamID}
	if m.User != "" {
		o["user"] = m.User
	}
	if m.Subtype != "" {
		o["subtype"] = m.Subtype
	}
	if m.BotID != "" {
		o["bot_id"] = m.BotID
		if m.BotID == s.botID {
			o["app_id"] = s.appID
			o["bot_profile"] = object{"id": s.botID, "app_id": s.appID, "name": s.name, "team_id": s.teamID, "deleted": false}
		}
	}
	if len(m.Blocks) > 0 {
		o["blocks"] = m.Blocks
	}
	if len(m.Files) > 0 {
		files := make([]object, len(m.Files))
		for i := range m.Files {
			files[i] = wireFile(&m.Files[i], s.teamID)
		}
		o["files"] = files
		o["upload"] = false
	}
	if m.Edits > 0 {
		o["edited"] = object{"user": m.User, "ts": m.editTS}
	}
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		o["thread_ts"] = m.ThreadTS
		if p := s.store.get(m.Channel, m.ThreadTS); p != nil {
			o["parent_user_id"] = p.User
		}
	} else if replies := s.store.thread(m.Channel, m.TS); len(replies) > 1 {
		o["thread_ts"] = m.TS
		users := []string{}
		for _, r := range replies[1:] {
			if r.User != "" && !slices.Contains(users, r.User) {
				users = append(users, r.User)
			}
		}
		o["reply_count"] = len(replies) - 1
		o["reply_users"] = users
		o["reply_users_count"] = len(users)
		o["latest_reply"] = replies[len(replies)-1].TS
	}
	return o
}

func (s *Server) wireChannel(c Channel) object {
	o := object{
		"id": c.ID, "created": 1700000000, "is_archived": false, "is_general": c.ID == General,
		"is_channel": c.Type == ChannelPublic, "is_group": c.Type == ChannelPrivate, "is_im": c.Type == ChannelIM,
		"is_mpim": c.Type == ChannelMPIM, "is_private": c.Type != ChannelPublic, "is_member": true,
		"is_ext_shared": false, "is_org_shared": false, "context_team_id": s.teamID,
	}
	if c.Type == ChannelIM {
		o["user"] = c.User
		o["is_open"] = true
	} else {
		o["name"] = c.Name
		o["name_normalized"] = c.Name
	}
	return o
}

func (s *Server) wireUser(u User) object {
	team := u.TeamID
	if team == "" {
		team = s.teamID
	}
	profile := object{"real_name": u.RealName, "display_name": u.Name, "team": team}
	if u.IsBot {
		profile["bot_id"] = u.BotID
	}
	return object{
		"id": u.ID, "team_id": team, "name": u.Name, "real_name": u.RealName, "deleted": false,
		"is_admin": u.IsAdmin, "is_owner": u.IsOwner, "is_primary_owner": u.IsPrimaryOwner, "is_restricted": u.IsRestricted || u.IsUltraRestricted,
		"is_ultra_restricted": u.IsUltraRestricted, "is_bot": u.IsBot, "is_app_user": false, "tz": "Europe/London",
		"tz_offset": 0, "profile": profile,
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}
