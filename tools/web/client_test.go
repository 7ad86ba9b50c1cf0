package web

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// GuardedClient refuses loopback unless its network is allowed, and
// follows no redirect (a token its caller adds must not follow one).
func TestGuardedClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	ports := []uint16{uint16(port)}

	_, err := GuardedClient(nil, ports).Get(srv.URL)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "127.0.0.1 is a loopback address") {
		t.Fatalf("loopback: %v", err)
	}
	allowed := GuardedClient([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ports)
	resp, err := allowed.Get(srv.URL)
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	resp.Body.Close()
	if _, err := allowed.Get(srv.URL + "/moved"); err == nil || !strings.Contains(err.Error(), "redirects are not followed") {
		t.Fatalf("redirect: %v", err)
	}
	if _, err := GuardedClient([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, nil).Get(srv.URL); !errors.Is(err, ErrRefused) {
		t.Fatalf("a port not allowed: %v", err)
	}
}
