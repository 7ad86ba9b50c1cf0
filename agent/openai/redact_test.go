package openai

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// TestErrorsHideURLCredentials: the base URL may hold a user and password
// (or a redirect may point at a URL with a key); no error of a failed call
// or of a refused config, which end up in the log and in doctor's output,
// shows them.
func TestErrorsHideURLCredentials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	withCreds := func(u string) string { return strings.Replace(u, "http://", "http://user:LEAK-pw@", 1) }

	check := func(t *testing.T, err error, host string) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		if strings.Contains(err.Error(), "LEAK") {
			t.Errorf("the error shows a secret: %v", err)
		}
		if host != "" && !strings.Contains(err.Error(), host) {
			t.Errorf("the error does not say where it went: %v", err)
		}
	}

	t.Run("config", func(t *testing.T) {
		for _, u := range []string{
			"https://user:LEAK-pw@llm.example/v1?key=LEAK-key",
			"https://llm.example/v1?api_key=LEAK-key&KEY=LEAK-2",
			"https://llm.example/v1#access_token=LEAK-frag",
			"ftp://user:LEAK-pw@llm.example/v1",
			"http://[::1/LEAK",
			"user:LEAK-pw@llm.example/v1",
		} {
			_, err := New(Config{BaseURL: u, Model: "m"})
			check(t, err, "")
		}
	})

	t.Run("connection refused", func(t *testing.T) {
		srv := fakellm.New(t)
		m, _ := newModel(t, srv, func(c *Config) { c.BaseURL, c.MaxRetries = withCreds("http://"+dead+"/v1"), -1 })
		_, err := m.Complete(context.Background(), userReq("hi"))
		check(t, err, dead)
		_, err = m.ListModels(context.Background())
		check(t, err, dead)
	})

	t.Run("HTTP 500", func(t *testing.T) {
		srv := fakellm.New(t, fakellm.WithReplies(fakellm.Error(500, "boom")))
		m, _ := newModel(t, srv, func(c *Config) { c.BaseURL, c.MaxRetries = withCreds(srv.URL()), -1 })
		_, err := m.Complete(context.Background(), userReq("hi"))
		check(t, err, "HTTP 500")
	})

	t.Run("redirect to a URL with a key", func(t *testing.T) {
		target := "http://" + dead + "/v1/chat/completions?key=LEAK-key&Sig=LEAK-sig&%6Bey=LEAK-3&key=LEAK-4#token=LEAK-5"
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, http.StatusTemporaryRedirect)
		}))
		defer redirect.Close()
		srv := fakellm.New(t)
		m, _ := newModel(t, srv, func(c *Config) { c.BaseURL, c.MaxRetries = withCreds(redirect.URL+"/v1"), -1 })
		_, err := m.Complete(context.Background(), userReq("hi"))
		check(t, err, dead)
		_, err = m.ListModels(context.Background())
		check(t, err, dead)
	})
}
