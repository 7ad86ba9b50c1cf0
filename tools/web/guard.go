package web

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"code.dny.dev/ssrf"
)

// guard decides which addresses fetch may connect to. It is consulted on a
// URL whose host is an IP literal (so it is refused before any socket
// exists) and, as the dialer's Control, on every address a connection is
// actually opened to: that covers host names, DNS rebinding and redirects.
type guard struct {
	ssrf     *ssrf.Guardian
	ports    []uint16
	portList string
}

func newGuard(allow []netip.Prefix, ports []uint16) *guard {
	var v4, v6 []netip.Prefix
	for _, p := range allow {
		if p.Addr().Is4() {
			v4 = append(v4, p.Masked())
		} else {
			v6 = append(v6, p.Masked())
		}
	}
	list := make([]string, len(ports))
	for i, p := range ports {
		list[i] = strconv.Itoa(int(p))
	}
	return &guard{
		ssrf: ssrf.New(
			ssrf.WithPorts(ports...),
			ssrf.WithAllowedV4Prefixes(v4...),
			ssrf.WithAllowedV6Prefixes(v6...),
			// Azure's wire server is a public address, but from inside
			// Azure it hands out instance configuration and secrets.
			ssrf.WithDeniedV4Prefixes(netip.MustParsePrefix("168.63.129.16/32")),
		),
		ports:    ports,
		portList: strings.Join(list, ", "),
	}
}

// check refuses an address or a port fetch may not reach.
func (g *guard) check(ap netip.AddrPort) error {
	// The address first: "a loopback address" tells more than "port 8080".
	if err := g.ssrf.SafeAddr(ap.Addr()); err != nil {
		return &refusedError{reason: fmt.Sprintf("%s is %s; fetch only reaches the public internet", ap.Addr(), describe(ap.Addr())), cause: err}
	}
	return g.checkPort(ap.Port())
}

func (g *guard) checkPort(port uint16) error {
	if !slices.Contains(g.ports, port) {
		return &refusedError{reason: fmt.Sprintf("port %d is not allowed; fetch only uses port %s", port, g.portList), cause: ssrf.ErrProhibitedPort}
	}
	return nil
}

// control is the dialer's Control: it runs after the name was resolved and
// before the connection is made. The library's own check has the last word.
func (g *guard) control(network, address string, c syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &refusedError{reason: fmt.Sprintf("cannot check the address %q", address), cause: err}
	}
	if err := g.check(ap); err != nil {
		return err
	}
	if err := g.ssrf.Safe(network, address, c); err != nil {
		return &refusedError{reason: err.Error(), cause: err}
	}
	return nil
}

// refusedError is a refusal by policy; subject, when set, says what was
// refused (a host name, a redirect) when the reason does not.
type refusedError struct {
	subject, reason string
	cause           error
}

func (e *refusedError) Error() string {
	if e.subject == "" {
		return "refused: " + e.reason
	}
	return "refused: " + e.subject + ": " + e.reason
}

func (e *refusedError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrRefused}
	}
	return []error{ErrRefused, e.cause}
}

func refused(format string, args ...any) error {
	return &refusedError{reason: fmt.Sprintf(format, args...)}
}

var specialAddrs = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "a cloud metadata address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata address"},
	{netip.MustParsePrefix("100.100.100.200/32"), "a cloud metadata address"},
	{netip.MustParsePrefix("168.63.129.16/32"), "a cloud metadata address"},
	{netip.MustParsePrefix("0.0.0.0/32"), "the unspecified address (it reaches this host)"},
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT (shared) address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
}

// describe names the kind of a refused address, for the message.
func describe(a netip.Addr) string {
	for _, s := range specialAddrs {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	switch {
	case a.Is4In6():
		return "an IPv4-mapped IPv6 address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsUnspecified():
		return "the unspecified address (it reaches this host)"
	case a.IsPrivate():
		return "a private network address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	}
	return "a reserved or special-purpose address"
}

// legacyIPv4 reads host the way the WHATWG URL standard, browsers and C
// resolvers do: a host whose last label is a number (2130706433, 0x7f.1,
// 0177.0.0.1) is an IPv4 address in decimal, octal or hex parts. numeric
// says host is such a host; addr is its address if it is a valid one.
func legacyIPv4(host string) (addr netip.Addr, numeric bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if _, ok := ipv4Number(last); !ok && (last == "" || strings.Trim(last, "0123456789") != "") {
		return netip.Addr{}, false
	}
	if len(parts) > 4 {
		return netip.Addr{}, true
	}
	var v uint64
	for i, p := range parts {
		n, ok := ipv4Number(p)
		switch {
		case !ok:
			return netip.Addr{}, true
		case i < len(parts)-1:
			if n > 255 {
				return netip.Addr{}, true
			}
			v += n << (8 * (3 - i))
		case n >= 1<<(8*(5-len(parts))):
			return netip.Addr{}, true
		default:
			v += n
		}
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// ipv4Number parses one part of a legacy IPv4 address: 0x… is hex, a
// leading 0 octal, else decimal.
func ipv4Number(s string) (uint64, bool) {
	base := 10
	switch {
	case s == "":
		return 0, false
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}
