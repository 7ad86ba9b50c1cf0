package faketelegram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Call is one Bot API request as the fake received and answered it.
type Call struct {
	// Method is the method's name as the Bot API spells it (sendMessage),
	// whatever case the request used; an unknown method as requested.
	Method string
	// Params are the form fields, multipart fields, query parameters or
	// top-level JSON fields of the request. A JSON value that is not a
	// string is kept as its JSON text, so reply_markup reads the same
	// whether it came in a form or in JSON.
	Params url.Values
	Files  []FormFile // the files of a multipart request
	Token  string
	At     time.Time
	// Status is the HTTP status answered, which Telegram makes the same
	// as error_code; 0 when the fake dropped the connection.
	Status      int
	Description string          // the description of an error
	RetryAfter  int             // parameters.retry_after of a 429
	Result      json.RawMessage // the result of a call answered ok
}

// OK reports whether the call was answered {"ok":true}.
func (c Call) OK() bool { return c.Status == http.StatusOK }

// FormFile is a file part of a multipart request.
type FormFile struct {
	Field       string // the form field: document, thumbnail…
	Name        string // the file name the client gave
	ContentType string
	Size        int
}

// apiError is an error answer: error_code (also the HTTP status) and
// description, as Telegram words it.
type apiError struct {
	code       int
	desc       string
	retryAfter int
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{code: http.StatusBadRequest, desc: "Bad Request: " + fmt.Sprintf(format, args...)}
}

var (
	errUnauthorized = &apiError{code: http.StatusUnauthorized, desc: "Unauthorized"}
	errNotFound     = &apiError{code: http.StatusNotFound, desc: "Not Found"}
	errTooLarge     = &apiError{code: http.StatusRequestEntityTooLarge, desc: "Request Entity Too Large"}
)

// webState is the record of calls and the scripted faults. Guarded by
// Server.mu.
type webState struct {
	calls   []Call
	limits  map[string]*rateLimit
	faults  map[string]*fault
	hangups map[string]int
}

type rateLimit struct {
	calls      int       // answer 429 to this many more calls
	until      time.Time // or to every call before this time
	retryAfter int
}

type fault struct {
	calls int
	code  int
	desc  string
}

func (w *webState) init() {
	w.limits = map[string]*rateLimit{}
	w.faults = map[string]*fault{}
	w.hangups = map[string]int{}
}

// methods are the methods the fake answers, by lower-case name: Bot API
// method names are case-insensitive.
var methods = func() map[string]string {
	m := map[string]string{}
	for _, name := range []string{
		"getMe", "getUpdates", "setWebhook", "deleteWebhook", "getWebhookInfo",
		"sendMessage", "editMessageText", "deleteMessage", "sendChatAction",
		"sendMessageDraft", "sendDocument", "getFile", "setMyCommands",
		"getMyCommands", "answerCallbackQuery", "editMessageReplyMarkup",
		"getChatAdministrators",
	} {
		m[strings.ToLower(name)] = name
	}
	return m
}()

// canonical is the Bot API spelling of method, or method as given if the
// fake does not know it.
func canonical(method string) string {
	if m, ok := methods[strings.ToLower(method)]; ok {
		return m
	}
	return method
}

// Calls returns the recorded calls of method, in order; every call if
// method is empty. Rejected calls (bad token, 429, unknown method) are
// recorded too.
func (s *Server) Calls(method string) []Call {
	method = canonical(method)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.web.calls {
		if method == "" || c.Method == method {
			c.Params = cloneValues(c.Params)
			c.Files = slices.Clone(c.Files)
			out = append(out, c)
		}
	}
	return out
}

// Count returns how many calls of method were received; of every method
// if method is empty.
func (s *Server) Count(method string) int {
	method = canonical(method)
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

// RateLimitNext answers the next n calls of method with 429 "Too Many
// Requests: retry after N" and parameters.retry_after N, as Telegram's
// flood control does (tgbotapi gives it as *tgbotapi.Error with
// RetryAfter). It replaces an earlier limit on method; n = 0 lifts it.
func (s *Server) RateLimitNext(method string, n, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.limits[canonical(method)] = &rateLimit{calls: n, retryAfter: retryAfter}
}

// RateLimitFor answers every call of method with 429 for d from now: a
// storm of flood control.
func (s *Server) RateLimitFor(method string, d time.Duration, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.limits[canonical(method)] = &rateLimit{until: time.Now().Add(d), retryAfter: retryAfter}
}

// FailNext answers the next n calls of method with error_code code and
// description, before the method does anything: FailNext("sendMessage",
// 1, 403, "Forbidden: bot was blocked by the user").
func (s *Server) FailNext(method string, n, code int, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.faults[canonical(method)] = &fault{calls: n, code: code, desc: description}
}

// DisconnectNext drops the connection of the next n calls of method
// without an answer, as a network failure does. The request is read and
// recorded (with Status 0) but has no effect.
func (s *Server) DisconnectNext(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.web.hangups[canonical(method)] = n
}

// request is a Bot API request being handled.
type request struct {
	method string
	p      url.Values
	files  map[string]upload
	// description is the description of a successful answer, as
	// setWebhook's "Webhook was set".
	description string
}

type upload struct {
	name, contentType string
	data              []byte
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, token, name string) {
	method := canonical(name)
	params, files, perr := parseRequest(r)
	req := &request{method: method, p: params, files: files}
	call := Call{Method: method, Params: params, Token: token, At: time.Now()}
	for field, f := range files {
		call.Files = append(call.Files, FormFile{Field: field, Name: f.name, ContentType: f.contentType, Size: len(f.data)})
	}
	slices.SortFunc(call.Files, func(a, b FormFile) int { return strings.Compare(a.Field, b.Field) })

	s.mu.Lock()
	aerr, hangup := s.gateLocked(token, name, method)
	if aerr == nil && !hangup && perr != nil {
		aerr = perr
	}
	var result any
	if aerr == nil && !hangup {
		if method == "getUpdates" {
			// It waits: s.mu is released while it does.
			s.mu.Unlock()
			result, aerr = s.getUpdates(r.Context(), req)
			s.mu.Lock()
		} else {
			result, aerr = s.handleLocked(req)
		}
	}
	var body []byte
	switch {
	case hangup:
		call.Description = "connection dropped"
	case aerr != nil:
		call.Status, call.Description, call.RetryAfter = aerr.code, aerr.desc, aerr.retryAfter
		o := map[string]any{"ok": false, "error_code": aerr.code, "description": aerr.desc}
		if aerr.retryAfter > 0 {
			o["parameters"] = map[string]any{"retry_after": aerr.retryAfter}
		}
		body, _ = json.Marshal(o)
	default:
		call.Status = http.StatusOK
		call.Result, _ = json.Marshal(result)
		o := map[string]any{"ok": true, "result": json.RawMessage(call.Result)}
		if req.description != "" {
			o["description"] = req.description
		}
		body, _ = json.Marshal(o)
	}
	s.web.calls = append(s.web.calls, call)
	s.notifyLocked()
	s.mu.Unlock()

	s.log("bot api call", "method", method, "status", call.Status, "description", call.Description)
	if hangup {
		dropConnection(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(max(call.Status, http.StatusOK))
	_, _ = w.Write(body)
}

// dropConnection closes the client's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// gateLocked answers what comes before a method runs: the token, whether
// the method exists, a scripted fault. s.mu must be held.
func (s *Server) gateLocked(token, name, method string) (*apiError, bool) {
	if token != s.token {
		return errUnauthorized, false
	}
	if _, ok := methods[strings.ToLower(name)]; !ok || s.disabled[strings.ToLower(name)] {
		return errNotFound, false
	}
	if n := s.web.hangups[method]; n > 0 {
		s.web.hangups[method] = n - 1
		return nil, true
	}
	if l := s.web.limits[method]; l != nil {
		if l.calls > 0 || time.Now().Before(l.until) {
			if l.calls > 0 {
				l.calls--
			}
			return &apiError{
				code:       http.StatusTooManyRequests,
				desc:       "Too Many Requests: retry after " + strconv.Itoa(l.retryAfter),
				retryAfter: l.retryAfter,
			}, false
		}
	}
	if f := s.web.faults[method]; f != nil && f.calls > 0 {
		f.calls--
		return &apiError{code: f.code, desc: f.desc}, false
	}
	return nil, false
}

// handleLocked runs a method other than getUpdates. s.mu must be held.
func (s *Server) handleLocked(req *request) (any, *apiError) {
	switch req.method {
	case "getMe":
		return map[string]any{
			"id": s.bot.ID, "is_bot": true, "first_name": s.bot.FirstName, "username": s.bot.Username,
			"can_join_groups": true, "can_read_all_group_messages": false,
			"supports_inline_queries": false, "can_connect_to_business": false, "has_main_web_app": false,
		}, nil
	case "setWebhook":
		return s.setWebhookLocked(req)
	case "deleteWebhook":
		return s.deleteWebhookLocked(req)
	case "getWebhookInfo":
		return s.webhookInfoLocked(), nil
	case "sendMessage":
		return s.sendMessageLocked(req)
	case "editMessageText":
		return s.editMessageTextLocked(req)
	case "deleteMessage":
		return s.deleteMessageLocked(req)
	case "sendChatAction":
		return s.sendChatActionLocked(req)
	case "sendMessageDraft":
		return s.sendMessageDraftLocked(req)
	case "sendDocument":
		return s.sendDocumentLocked(req)
	case "getFile":
		return s.getFileLocked(req)
	case "setMyCommands":
		return s.setMyCommandsLocked(req)
	case "getMyCommands":
		return s.getMyCommandsLocked(req)
	case "answerCallbackQuery":
		return s.answerCallbackLocked(req)
	case "editMessageReplyMarkup":
		return s.editMessageReplyMarkupLocked(req)
	case "getChatAdministrators":
		return s.getChatAdministratorsLocked(req)
	}
	return nil, errNotFound
}

// maxBody bounds a request body that is not a file upload.
const maxBody = 10 << 20

// parseRequest reads the parameters of a request as the Bot API does:
// query, form body, multipart form (with files) or JSON body.
func parseRequest(r *http.Request) (url.Values, map[string]upload, *apiError) {
	p := cloneValues(r.URL.Query())
	files := map[string]upload{}
	ct, ctParams, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			return p, files, badRequest("can't read request body")
		}
		if t := bytes.TrimSpace(body); len(t) > 0 {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(t, &m); err != nil {
				return p, files, badRequest("can't parse JSON object")
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
		mr := multipartReader(r.Body, ctParams["boundary"])
		if mr == nil {
			return p, files, badRequest("can't parse multipart form")
		}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return p, files, badRequest("can't parse multipart form")
			}
			if part.FileName() == "" {
				v, err := io.ReadAll(io.LimitReader(part, maxBody))
				if err != nil {
					return p, files, badRequest("can't parse multipart form")
				}
				p.Add(part.FormName(), string(v))
				continue
			}
			data, err := io.ReadAll(io.LimitReader(part, MaxUploadSize+1))
			if err != nil {
				return p, files, badRequest("can't parse multipart form")
			}
			if len(data) > MaxUploadSize {
				return p, files, errTooLarge
			}
			files[part.FormName()] = upload{name: part.FileName(), contentType: part.Header.Get("Content-Type"), data: data}
		}
	default:
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			return p, files, badRequest("can't read request body")
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return p, files, badRequest("can't parse request body")
		}
		for k, v := range form {
			p[k] = append(p[k], v...)
		}
	}
	return p, files, nil
}

// jsonParam returns the JSON text of parameter name, or nil when it is
// absent, empty or null. tgbotapi sends a nil slice as "null"
// (allowed_updates=null, entities=null), which Telegram takes as absent.
func jsonParam(p url.Values, name string) []byte {
	v := strings.TrimSpace(p.Get(name))
	if v == "" || v == "null" {
		return nil
	}
	return []byte(v)
}

// intParam returns parameter name as an integer; ok is false when it is
// absent or not an integer.
func intParam(p url.Values, name string) (int64, bool) {
	v := strings.TrimSpace(p.Get(name))
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// boolParam reads a Bot API boolean: true, or 1.
func boolParam(p url.Values, name string) bool {
	v := strings.ToLower(strings.TrimSpace(p.Get(name)))
	return v == "true" || v == "1"
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

func writeError(w http.ResponseWriter, code int, desc string) {
	o := map[string]any{"ok": false, "error_code": code, "description": desc}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(o)
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

func multipartReader(body io.Reader, boundary string) *multipart.Reader {
	if boundary == "" {
		return nil
	}
	return multipart.NewReader(body, boundary)
}
