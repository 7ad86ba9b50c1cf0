package web

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

// deadAddr is host:port on ip where nothing listens.
func deadAddr(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// noSecret fails when err is nil or shows a secret (every secret in these
// tests holds LEAK), or when it does not name want (so it stays useful).
func noSecret(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "LEAK") {
		t.Errorf("the error shows a secret: %v", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("the error %q does not contain %q", err, want)
	}
}

// TestSearchErrorsHideURLCredentials: the engine's URL may hold a user and
// password or a key; no error of a failed search, which is logged and
// read by the model, shows them.
func TestSearchErrorsHideURLCredentials(t *testing.T) {
	creds := func(base string) string {
		return strings.Replace(base, "http://", "http://user:LEAK-pw@", 1) + "/?api_key=LEAK-key&KEY=LEAK-2&%6Bey=LEAK-3#token=LEAK-4"
	}
	search := func(t *testing.T, url string) error {
		t.Helper()
		tool, err := Search(SearchConfig{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		_, err = call(t, tool, map[string]any{"query": "q"})
		return err
	}

	t.Run("bad URL", func(t *testing.T) {
		for _, u := range []string{"ftp://user:LEAK-pw@h/?key=LEAK-key", "http://[::1/?key=LEAK", "user:LEAK-pw@h/?token=LEAK"} {
			_, err := Search(SearchConfig{URL: u})
			noSecret(t, err, "engine URL")
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		noSecret(t, search(t, creds("http://"+deadAddr(t, "127.0.0.1"))), "connection refused")
	})
	t.Run("HTTP 500", func(t *testing.T) {
		f, url := newFakeSearxng(t, 500, "oops")
		noSecret(t, search(t, creds(url)), "500")
		// The key is still sent: the engine URL's parameters go along.
		if len(f.queries) != 1 || !strings.Contains(f.queries[0], "api_key=LEAK-key") || !strings.Contains(f.queries[0], "q=q") {
			t.Errorf("the engine was asked %q", f.queries)
		}
	})
	t.Run("redirect to a URL with a key", func(t *testing.T) {
		to := "http://" + deadAddr(t, "127.0.0.1") + "/search?sig=LEAK-sig&Access_Token=LEAK-tok"
		srv := serve(t, "127.0.0.1", http.RedirectHandler(to, http.StatusFound))
		noSecret(t, search(t, creds(srv.URL)), "connection refused")
	})
}

// TestFetchErrorsHideURLCredentials: the model may fetch a URL with a key,
// or a page may redirect to a signed URL; the errors, logged and shown in
// the progress message, do not repeat the secrets, but still say where.
func TestFetchErrorsHideURLCredentials(t *testing.T) {
	mux := http.NewServeMux()
	srv := serve(t, allowed, mux)
	forbidden := serve(t, "127.0.0.1", http.NotFoundHandler())
	dead := deadAddr(t, allowed)
	_, deadPort, _ := net.SplitHostPort(dead)
	var port uint16
	for _, c := range deadPort {
		port = port*10 + uint16(c-'0')
	}
	cfg := allowCfg(srv.port, port)
	redirect := func(to string) http.Handler { return http.RedirectHandler(to, http.StatusFound) }
	mux.Handle("/missing", http.NotFoundHandler())
	mux.Handle("/to-dead", redirect("http://"+dead+"/x?api_key=LEAK-key&sig=LEAK-sig"))
	mux.Handle("/to-forbidden", redirect(forbidden.URL+"/x?token=LEAK-tok"))
	mux.Handle("/to-file", redirect("file:///x?password=LEAK-pw"))
	mux.Handle("/loop", redirect("/loop?key=LEAK-key"))

	for _, tc := range []struct{ url, want string }{
		{srv.URL + "/missing?token=LEAK-tok&Key=LEAK-2#access_token=LEAK-3", allowed},
		{srv.URL + "/to-dead", dead},
		{srv.URL + "/to-forbidden", "127.0.0.1"},
		{srv.URL + "/to-file", "file:"},
		{srv.URL + "/loop?key=LEAK-key", "too many redirects"},
		{"http://" + dead + "/?%6Bey=LEAK-key&key=LEAK-2", dead},
		{"example.com/?token=LEAK", "example.com"},
		{"http://user:LEAK/x@example.com/", "not a valid URL"},
		{"http://[::1/?key=LEAK", "not a valid URL"},
	} {
		_, err := fetchURL(t, cfg, tc.url)
		noSecret(t, err, tc.want)
	}
}
