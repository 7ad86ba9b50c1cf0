package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Profiles go to this machine only: a peer on the network (the listener
// may face one) is refused, whatever path or header it tries.
func TestPprofLoopbackOnly(t *testing.T) {
	mux := http.NewServeMux()
	routePprof(mux)
	for _, tc := range []struct {
		remote, path string
		want         int
	}{
		{"127.0.0.1:40000", "/debug/pprof/", http.StatusOK},
		{"[::1]:40000", "/debug/pprof/goroutine?debug=1", http.StatusOK},
		{"10.1.2.3:40000", "/debug/pprof/", http.StatusForbidden},
		{"10.1.2.3:40000", "/debug/pprof/cmdline", http.StatusForbidden},
		{"[::ffff:10.1.2.3]:40000", "/debug/pprof/heap", http.StatusForbidden},
		{"192.168.1.9:1", "/debug/pprof/symbol", http.StatusForbidden},
		{"garbage", "/debug/pprof/", http.StatusForbidden},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		req.RemoteAddr = tc.remote
		req.Header.Set("X-Forwarded-For", "127.0.0.1")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.remote, tc.path, rec.Code, tc.want)
		}
		if tc.want == http.StatusOK && !strings.Contains(rec.Body.String(), "goroutine") {
			t.Errorf("%s %s: no profile in %.200q", tc.remote, tc.path, rec.Body.String())
		}
	}
}
