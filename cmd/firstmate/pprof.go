package main

import (
	"net"
	"net/http"
	"net/http/pprof"
)

// routePprof serves Go's profiles under /debug/pprof/ to loopback peers
// only: the listener may face a network (http.addr ":8080" in a
// container), and a profile shows memory, goroutines and command lines.
func routePprof(mux *http.ServeMux) {
	mux.Handle("/debug/pprof/", loopbackOnly(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", loopbackOnly(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", loopbackOnly(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", loopbackOnly(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", loopbackOnly(http.HandlerFunc(pprof.Trace)))
}

func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			http.Error(w, "profiles are served to this machine only", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
