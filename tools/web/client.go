package web

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/firstmate/firstmate/internal/redact"
)

// GuardedClient returns an HTTP client for another tool's server (an MCP
// server over HTTP) that dials through fetch's guard: the public internet
// and the allowed networks only, on the given ports (empty: 80 and 443),
// never through the environment's proxy. It sets no overall timeout and
// waits for response headers as long as the request's context allows:
// such a server may hold a response, or stream it, for as long as a call
// runs. It follows no redirect: the headers its caller adds (a token) must
// not follow one to another host.
func GuardedClient(allow []netip.Prefix, ports []uint16) *http.Client {
	if len(ports) == 0 {
		ports = []uint16{80, 443}
	}
	g := newGuard(allow, ports)
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	t := newTransport(dialer)
	t.ResponseHeaderTimeout = 0
	return &http.Client{Transport: t, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("the server redirected to %s; redirects are not followed: configure the address it points to", redact.URL(req.URL.String()))
	}}
}
