package fakeslack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Slack's limits on what a message may carry.
const (
	maxTextRunes     = 40_000 // text; over it chat.postMessage answers msg_too_long
	maxMarkdownRunes = 12_000 // all markdown blocks of one message together
	maxSectionRunes  = 3_000  // the text of a section block
	maxHeaderRunes   = 150    // the text of a header block
	maxBlocks        = 50
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
// of zero sends "Retry-After: 0", which keeps tests fast.
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
		"assistant.threads.setStatus",
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
	case "files.getUploadURLExternal":
		return s.uploadURLLocked(c.p)
	case "files.completeUploadExternal":
		return s.completeUploadLocked(c)
	}
	return nil, "unknown_method"
}

// checkContent applies Slack's limits to the text and blocks of a message.
// It returns the blocks, nil when the request has none.
func checkContent(p url.Values) (json.RawMessage, string) {
	if utf8.RuneCountInString(p.Get("text")) > maxTextRunes {
		return nil, "msg_too_long"
	}
	raw := p.Get("blocks")
	if raw == "" {
		return nil, ""
	}
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
		return nil, "invalid_blocks_format"
	}
	if len(blocks) > maxBlocks {
		return nil, "invalid_blocks"
	}
	markdown := 0
	for _, b := range blocks {
		switch b["type"] {
		case "markdown":
			t, _ := b["text"].(string)
			markdown += utf8.RuneCountInString(t)
		case "section":
			if utf8.RuneCountInString(textOf(b["text"])) > maxSectionRunes {
				return nil, "invalid_blocks"
			}
		case "header":
			if utf8.RuneCountInString(textOf(b["text"])) > maxHeaderRunes {
				return nil, "invalid_blocks"
			}
		case nil, "":
			return nil, "invalid_blocks"
		}
	}
	if markdown > maxMarkdownRunes {
		return nil, "invalid_blocks"
	}
	return json.RawMessage(raw), ""
}

// textOf reads the text of a text object {"type":"mrkdwn","text":"…"}.
func textOf(v any) string {
	o, _ := v.(map[string]any)
	t, _ := o["text"].(string)
	return t
}

func hasContent(p url.Values) bool {
	return p.Get("text") != "" || p.Has("blocks") || p.Get("attachments") != "" || p.Get("file_ids") != ""
}

func (s *Server) postMessageLocked(c *apiCall) (object, string) {
	ch, ok := s.channelLocked(c.p.Get("channel"))
	if !ok {
		return nil, "channel_not_found"
	}
	blocks, code := checkContent(c.p)
	if code != "" {
		return nil, code
	}
	if !hasContent(c.p) {
		return nil, "no_text"
	}
	m := &Message{
		Channel: ch.ID, TS: s.nextTSLocked(), ThreadTS: c.p.Get("thread_ts"),
		User: s.botUserID, BotID: s.botID, Text: c.p.Get("text"), Blocks: blocks, Posted: time.Now(),
	}
	s.store.put(m)
	s.echoLocked(c, func() Event { return s.ownMessageEventLocked(m) })
	return object{"channel": ch.ID, "ts": m.TS, "message": s.wireMessageLocked(m)}, ""
}

// ownMessageLocked finds a message the bot may change: the codes are
// chat.update's and chat.delete's. s.mu must be held.
func (s *Server) ownMessageLocked(p url.Values, notOwn string) (*Message, string) {
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return nil, "channel_not_found"
	}
	m := s.store.get(ch.ID, p.Get("ts"))
	if m == nil || m.Deleted {
		return nil, "message_not_found"
	}
	if m.BotID != s.botID {
		return nil, notOwn
	}
	return m, ""
}

func (s *Server) updateLocked(c *apiCall) (object, string) {
	m, code := s.ownMessageLocked(c.p, "cant_update_message")
	if code != "" {
		return nil, code
	}
	blocks, code := checkContent(c.p)
	if code != "" {
		return nil, code
	}
	if !hasContent(c.p) {
		return nil, "no_text"
	}
	before := s.wireMessageLocked(m)
	// Slack keeps what an update leaves out: text without blocks keeps
	// the blocks, and the other way round; "blocks=[]" removes them.
	if c.p.Has("text") {
		m.Text = c.p.Get("text")
	}
	if c.p.Has("blocks") {
		m.Blocks = blocks
	}
	m.Edits++
	m.Edited = time.Now()
	m.editTS = s.nextTSLocked()
	s.echoLocked(c, func() Event { return s.changedEventLocked(m, before) })
	return object{"channel": m.Channel, "ts": m.TS, "text": m.Text, "message": s.wireMessageLocked(m)}, ""
}

func (s *Server) deleteLocked(c *apiCall) (object, string) {
	m, code := s.ownMessageLocked(c.p, "cant_delete_message")
	if code != "" {
		return nil, code
	}
	before := s.wireMessageLocked(m)
	m.Deleted = true
	s.echoLocked(c, func() Event { return s.deletedLocked(m.Channel, m.TS, before) })
	return object{"channel": m.Channel, "ts": m.TS}, ""
}

func (s *Server) postEphemeralLocked(c *apiCall) (object, string) {
	ch, ok := s.channelLocked(c.p.Get("channel"))
	if !ok {
		return nil, "channel_not_found"
	}
	if _, ok := s.users[c.p.Get("user")]; !ok {
		return nil, "user_not_found"
	}
	blocks, code := checkContent(c.p)
	if code != "" {
		return nil, code
	}
	if !hasContent(c.p) {
		return nil, "no_text"
	}
	e := Ephemeral{
		Channel: ch.ID, User: c.p.Get("user"), ThreadTS: c.p.Get("thread_ts"), Text: c.p.Get("text"),
		Blocks: blocks, TS: s.nextTSLocked(), At: time.Now(),
	}
	s.store.ephemerals = append(s.store.ephemerals, e)
	return object{"message_ts": e.TS}, ""
}

// streamLocked serves chat.startStream, chat.appendStream and
// chat.stopStream (slack-go: StartStream, AppendStream, StopStream), which
// send channel, ts (but for start), thread_ts, markdown_text, chunks,
// recipient_team_id and recipient_user_id as form fields.
func (s *Server) streamLocked(method string, c *apiCall) (object, string) {
	if utf8.RuneCountInString(c.p.Get("markdown_text")) > maxMarkdownRunes {
		return nil, "msg_too_long"
	}
	var chunks []json.RawMessage
	if raw := c.p.Get("chunks"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &chunks); err != nil {
			return nil, "invalid_chunks"
		}
	}
	var m *Message
	if method == "chat.startStream" {
		ch, ok := s.channelLocked(c.p.Get("channel"))
		if !ok {
			return nil, "channel_not_found"
		}
		m = &Message{
			Channel: ch.ID, TS: s.nextTSLocked(), ThreadTS: c.p.Get("thread_ts"),
			User: s.botUserID, BotID: s.botID, Streaming: true, Posted: time.Now(),
		}
		s.store.put(m)
	} else {
		var code string
		if m, code = s.ownMessageLocked(c.p, "message_not_owned_by_app"); code != "" {
			return nil, code
		}
		if !m.Streaming {
			return nil, "message_not_in_streaming_state"
		}
		if method == "chat.appendStream" {
			m.Appends++
		}
	}
	m.Text += c.p.Get("markdown_text")
	for _, raw := range chunks {
		var ch struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &ch) == nil && ch.Type == "markdown_text" {
			m.Text += ch.Text
		} else {
			m.Chunks = append(m.Chunks, raw)
		}
	}
	if method == "chat.stopStream" {
		m.Streaming = false
		if blocks, code := checkContent(url.Values{"blocks": c.p["blocks"]}); code != "" {
			return nil, code
		} else if blocks != nil {
			m.Blocks = blocks
		}
	}
	return object{"channel": m.Channel, "ts": m.TS}, ""
}

func (s *Server) reactLocked(add bool, p url.Values) (object, string) {
	name := strings.Trim(p.Get("name"), ":")
	if name == "" {
		return nil, "invalid_name"
	}
	ch, ok := s.channelLocked(p.Get("channel"))
	if !ok {
		return nil, "channel_not_found"
	}
	m := s.store.get(ch.ID, p.Get("timestamp"))
	if m == nil || m.Deleted {
		return nil, "message_not_found"
	}
	k := msgKey{m.Channel, m.TS}
	i := slices.Index(s.store.reactions[k], name)
	switch {
	case add && i >= 0:
		return nil, "already_reacted"
	case add:
		s.store.reactions[k] = append(s.store.reactions[k], name)
	case i < 0:
		return nil, "no_reaction"
	default:
		s.store.reactions[k] = slices.Delete(s.store.reactions[k], i, i+1)
	}
	return nil, ""
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

func (s *Server) uploadURLLocked(p url.Values) (object, string) {
	length, err := strconv.Atoi(p.Get("length"))
	if p.Get("filename") == "" || err != nil || length <= 0 {
		return nil, "invalid_arguments"
	}
	id := randomID("F", 10)
	s.store.uploads[id] = &upload{name: p.Get("filename"), alt: p.Get("alt_txt"), length: length}
	return object{"upload_url": s.srv.URL + uploadPath + id, "file_id": id}, ""
}

func (s *Server) completeUploadLocked(c *apiCall) (object, string) {
	var files []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(c.p.Get("files")), &files); err != nil || len(files) == 0 {
		return nil, "invalid_arguments"
	}
	chID := c.p.Get("channel_id")
	if chID == "" && c.p.Get("channels") != "" {
		chID, _, _ = strings.Cut(c.p.Get("channels"), ",")
	}
	if chID != "" {
		ch, ok := s.channelLocked(chID)
		if !ok {
			return nil, "channel_not_found"
		}
		chID = ch.ID
	}
	for _, f := range files {
		// Slack's code for a file that was never uploaded is not
		// documented; this one names the fault.
		if u := s.store.uploads[f.ID]; u == nil || !u.received {
			return nil, "file_not_found"
		}
	}
	now := time.Now()
	var (
		out    []object
		shared []File
	)
	for _, f := range files {
		u := s.store.uploads[f.ID]
		delete(s.store.uploads, f.ID)
		title := f.Title
		if title == "" {
			title = u.name
		}
		file := &File{
			ID: f.ID, Name: u.name, Title: title, Mimetype: mimeFor(u.name), AltText: u.alt, Content: u.content,
			User: s.botUserID, Channel: chID, ThreadTS: c.p.Get("thread_ts"), Comment: c.p.Get("initial_comment"), Shared: now,
		}
		file.URL = s.fileURL(file)
		s.store.files[file.ID] = file
		s.store.shared = append(s.store.shared, file.ID)
		out = append(out, object{"id": file.ID, "title": file.Title})
		shared = append(shared, *file)
	}
	if chID != "" {
		// Slack shares the files with a message of the bot's.
		m := &Message{
			Channel: chID, TS: s.nextTSLocked(), ThreadTS: c.p.Get("thread_ts"), User: s.botUserID, BotID: s.botID,
			Text: c.p.Get("initial_comment"), Files: shared, Posted: now,
		}
		s.store.put(m)
		s.echoLocked(c, func() Event { return s.ownMessageEventLocked(m) })
	}
	return object{"files": out}, ""
}

// serveUpload takes the bytes of a file at its upload URL: the body of a
// multipart form (the "file" field, as slack-go sends it) or the raw body.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	content, err := readUpload(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	u := s.store.uploads[id]
	if u != nil {
		u.content, u.received = content, true
		s.notifyLocked()
	}
	s.mu.Unlock()
	if u == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "OK - %d", len(content))
}

func readUpload(r *http.Request) ([]byte, error) {
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		return io.ReadAll(r.Body)
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("no file in the form: %w", err)
		}
		if part.FormName() == "file" || part.FileName() != "" {
			return io.ReadAll(part)
		}
	}
}

// serveFile serves url_private. Without the bot token Slack redirects to
// the sign-in page, with the file's path in redir; slack-go's GetFile
// recognizes that.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, filesPath)
	teamAndID, _, _ := strings.Cut(rest, "/")
	id := strings.TrimPrefix(teamAndID, s.teamID+"-")
	if r.Header.Get("Authorization") != "Bearer "+s.botToken {
		http.Redirect(w, r, signinPath+"?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
		return
	}
	s.mu.Lock()
	f := s.store.files[id]
	var content []byte
	var mt string
	if f != nil {
		content, mt = f.Content, f.Mimetype
	}
	s.mu.Unlock()
	if f == nil {
		http.NotFound(w, r)
		return
	}
	if mt != "" {
		w.Header().Set("Content-Type", mt)
	}
	_, _ = w.Write(content)
}

func (s *Server) serveResponseURL(w http.ResponseWriter, r *http.Request, id string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	s.mu.Lock()
	s.store.responses = append(s.store.responses, Response{URL: s.srv.URL + responsePath + id, Body: body, At: time.Now()})
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, object{"ok": true})
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

func wireFile(f *File, team string) object {
	ext := ""
	if i := strings.LastIndexByte(f.Name, '.'); i >= 0 {
		ext = f.Name[i+1:]
	}
	return object{
		"id": f.ID, "created": f.Shared.Unix(), "timestamp": f.Shared.Unix(), "name": f.Name, "title": f.Title,
		"mimetype": f.Mimetype, "filetype": ext, "pretty_type": strings.ToUpper(ext), "user": f.User,
		"user_team": team, "mode": "hosted", "editable": false, "is_external": false, "external_type": "",
		"size": len(f.Content), "url_private": f.URL, "url_private_download": strings.Replace(f.URL, "/"+url.PathEscape(f.Name), "/download/"+url.PathEscape(f.Name), 1),
		"permalink": "https://slack.com/files/" + f.User + "/" + f.ID + "/" + url.PathEscape(f.Name),
		"is_public": false, "public_url_shared": false, "has_rich_preview": false,
	}
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
	profile := object{"real_name": u.RealName, "display_name": u.Name, "team": s.teamID}
	if u.IsBot {
		profile["bot_id"] = u.BotID
	}
	return object{
		"id": u.ID, "team_id": s.teamID, "name": u.Name, "real_name": u.RealName, "deleted": false,
		"is_admin": u.IsAdmin, "is_owner": u.IsOwner, "is_primary_owner": false, "is_restricted": false,
		"is_ultra_restricted": false, "is_bot": u.IsBot, "is_app_user": false, "tz": "Europe/London",
		"tz_offset": 0, "profile": profile,
	}
}

// mimeFor guesses a file's type from its name, as Slack does.
func mimeFor(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		if t := mime.TypeByExtension(name[i:]); t != "" {
			return t
		}
	}
	return "application/octet-stream"
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
