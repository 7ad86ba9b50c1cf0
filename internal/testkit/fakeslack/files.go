package fakeslack

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Files upload v2, as slack-go's UploadFile does it: files.getUploadURLExternal
// hands out an upload URL (on the fake: slack-go sends the token only to
// Slack's hosts or the API URL's), the bytes are posted there, and
// files.completeUploadExternal shares the file in a channel or thread.

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
	if t, ok := s.store.targets[id]; ok {
		s.respondLocked(t, body)
	}
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, object{"ok": true})
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

// mimeFor guesses a file's type from its name, as Slack does.
func mimeFor(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		if t := mime.TypeByExtension(name[i:]); t != "" {
			return t
		}
	}
	return "application/octet-stream"
}
