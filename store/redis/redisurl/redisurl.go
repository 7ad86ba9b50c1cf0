// Package redisurl parses firstmate's REDIS_URL, which names one of three
// kinds of Redis deployment:
//
//	redis://[user:password@]host[:port][/db][?options]
//	    one node (port 6379 if left out, database 0).
//	redis+cluster://[user:password@]host1[:port1],host2[:port2],...[/][?options]
//	    a Redis Cluster: the hosts are seed nodes, any of which is enough
//	    to find the rest; a Cluster has only database 0.
//	redis+sentinel://[user:password@]host1[:port1],host2[:port2],.../master[/db][?options]
//	    a master managed by Redis Sentinel: the hosts are sentinels (port
//	    26379 if left out), master is the name they monitor it under. The
//	    user name and password are the master's; sentinels that want a
//	    password of their own get it in the option sentinel_password (and
//	    sentinel_username for an ACL user). Without it the sentinels are
//	    asked without one.
//
// rediss, rediss+cluster and rediss+sentinel are the same over TLS. A
// single node's certificate is checked against its host name; a Cluster's
// nodes and a Sentinel's sentinels and master are each checked against the
// address dialed (for the nodes and the master, the one the servers
// announce), or all against tls_server_name when it is given.
//
// A user name or password holding one of / ? # @ : % must percent-encode
// it (%2F %3F %23 %40 %3A %25). The options after '?' are go-redis's
// (dial_timeout=3s, pool_size=20, ...: see goredis.ParseURL,
// ParseClusterURL and ParseFailoverURL), and skip_verify=true and
// tls_server_name=NAME for TLS. Hosts are listed only in the host part:
// the forms other clients use for several hosts or for a Cluster or a
// master name (?addr=, ?cluster=true, ?master_name=) are refused with a
// pointer to the form above, as are credentials in options (?password=).
//
// Errors never quote the URL, which may hold a password; they name the
// part that is wrong.
package redisurl

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Kind is the kind of deployment a URL names.
type Kind int

const (
	// Node is one Redis server (redis://, rediss://).
	Node Kind = iota
	// Cluster is a Redis Cluster (redis+cluster://, rediss+cluster://).
	Cluster
	// Sentinel is a master managed by Redis Sentinel (redis+sentinel://,
	// rediss+sentinel://).
	Sentinel
)

func (k Kind) String() string {
	switch k {
	case Node:
		return "node"
	case Cluster:
		return "cluster"
	case Sentinel:
		return "sentinel"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Default ports.
const (
	DefaultPort         = "6379"
	DefaultSentinelPort = "26379"
)

// URL is a parsed REDIS_URL. Its String never shows a password.
type URL struct {
	Kind Kind
	// Scheme is the URL's scheme, lower case: redis, rediss+cluster, ...
	Scheme string
	// TLS is true for the rediss schemes.
	TLS bool
	// Addrs are the hosts as host:port: the node, the Cluster's seed
	// nodes or the sentinels.
	Addrs []string
	// DB is the database number (always 0 on a Cluster).
	DB int
	// Master is the name the sentinels know the master by (Sentinel only).
	Master string

	username, password                 string
	sentinelUsername, sentinelPassword string

	node     *goredis.Options
	cluster  *goredis.ClusterOptions
	failover *goredis.FailoverOptions
}

// HasPassword reports whether the URL holds a password (the servers' or
// the sentinels').
func (u *URL) HasPassword() bool { return u.password != "" || u.sentinelPassword != "" }

// String describes the deployment, without credentials: "Redis node
// redis:6379, db 0", "Redis Cluster (seeds a:6379, b:6379)", "Redis
// Sentinel master \"mymaster\" (sentinels a:26379, b:26379), db 0", each
// followed by ", TLS" when it is.
func (u *URL) String() string {
	var s string
	switch u.Kind {
	case Node:
		s = fmt.Sprintf("Redis node %s, db %d", u.Addrs[0], u.DB)
	case Cluster:
		s = fmt.Sprintf("Redis Cluster (seeds %s)", strings.Join(u.Addrs, ", "))
	case Sentinel:
		s = fmt.Sprintf("Redis Sentinel master %q (sentinels %s), db %d", u.Master, strings.Join(u.Addrs, ", "), u.DB)
	}
	if u.TLS {
		s += ", TLS"
	}
	return s
}

// NewClient returns a new client for the URL: a *goredis.Client for a
// node, a *goredis.ClusterClient for a Cluster and a failover
// *goredis.Client for Sentinel. It does not connect yet.
func (u *URL) NewClient() goredis.UniversalClient {
	switch u.Kind {
	case Cluster:
		o := *u.cluster
		o.Addrs = slices.Clone(o.Addrs)
		return goredis.NewClusterClient(&o)
	case Sentinel:
		o := *u.failover
		o.SentinelAddrs = slices.Clone(o.SentinelAddrs)
		return goredis.NewFailoverClient(&o)
	}
	o := *u.node
	return goredis.NewClient(&o)
}

// Options returns the go-redis options of a node URL, nil for the others.
func (u *URL) Options() *goredis.Options {
	if u.node == nil {
		return nil
	}
	o := *u.node
	return &o
}

// schemes maps each accepted scheme to its kind and whether it is TLS.
var schemes = map[string]struct {
	kind Kind
	tls  bool
}{
	"redis":           {Node, false},
	"rediss":          {Node, true},
	"redis+cluster":   {Cluster, false},
	"rediss+cluster":  {Cluster, true},
	"redis+sentinel":  {Sentinel, false},
	"rediss+sentinel": {Sentinel, true},
}

const schemeList = "redis or rediss (TLS) for one node, redis+cluster or rediss+cluster for a Cluster, redis+sentinel or rediss+sentinel for Sentinel"

// examples, by kind, for the errors.
var examples = [...]string{
	Node:     "redis://:password@host:6379/0",
	Cluster:  "redis+cluster://:password@host1:6379,host2:6379",
	Sentinel: "redis+sentinel://:password@sentinel1:26379,sentinel2:26379/mymaster/0",
}

// parts is a URL split into its raw pieces, before their meaning is
// checked.
type parts struct {
	scheme         string // lower case
	user, password string // decoded
	rawPassword    string // as written
	hasPassword    bool
	hosts          string // as written: host[:port],...
	path           string // as written, with its leading '/'
	query          string // after '?'
}

// split splits raw into its parts. The user info is everything before the
// authority's last '@'; a '/', '?', '#' or '@' that would end it early is
// refused, so the hosts, path and query never hold part of a password and
// may be quoted in errors.
func split(raw string) (parts, error) {
	var p parts
	if raw == "" {
		return p, errors.New("is empty; write it like " + examples[Node])
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if strings.Contains(raw, "@") {
			return p, errors.New("has no scheme; write it like " + examples[Node])
		}
		return p, fmt.Errorf("%q has no scheme; use redis://%s (or rediss:// for TLS)", raw, raw)
	}
	if !validScheme(scheme) {
		return p, errors.New("is not a valid URL; write it like " + examples[Node])
	}
	p.scheme = strings.ToLower(scheme)
	for _, c := range []byte(rest) {
		if c < 0x20 || c == 0x7f {
			return p, errors.New("contains a control character or a line break")
		}
	}
	if strings.Contains(rest, "#") {
		return p, errors.New("contains a '#': percent-encode it as %23 in the user name or password")
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if strings.Contains(tail, "@") {
		return p, errors.New("has an '@' after the host: percent-encode any '/', '?' or '@' in the user name or password (%2F, %3F, %40)")
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user, password, hasPassword := strings.Cut(authority[:at], ":")
		var err1, err2 error
		p.user, err1 = url.PathUnescape(user)
		p.password, err2 = url.PathUnescape(password)
		if err1 != nil || err2 != nil {
			return p, errors.New("the user name or password has an invalid %-escape; write a '%' as %25")
		}
		p.hasPassword, p.rawPassword = hasPassword, password
		authority = authority[at+1:]
	}
	p.hosts = authority
	p.path, p.query, _ = strings.Cut(tail, "?")
	return p, nil
}

func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// Parse parses a REDIS_URL (see the package documentation) and checks its
// options as the client will. Its errors never quote the URL: they read
// well after "REDIS_URL: ".
func Parse(raw string) (*URL, error) {
	p, err := split(raw)
	if err != nil {
		return nil, err
	}
	sch, ok := schemes[p.scheme]
	if !ok {
		return nil, fmt.Errorf("the scheme must be %s, not %q", schemeList, p.scheme)
	}
	u := &URL{Kind: sch.kind, Scheme: p.scheme, TLS: sch.tls, username: p.user, password: p.password}
	example := examples[u.Kind]

	// The hosts.
	if p.hosts == "" {
		return nil, errors.New("has no host; write it like " + example)
	}
	port := DefaultPort
	if u.Kind == Sentinel {
		port = DefaultSentinelPort
	}
	for h := range strings.SplitSeq(p.hosts, ",") {
		addr, err := hostPort(h, port)
		if err != nil {
			return nil, err
		}
		u.Addrs = append(u.Addrs, addr)
	}
	if u.Kind == Node && len(u.Addrs) > 1 {
		return nil, fmt.Errorf("names %d hosts, and %s:// is one node: use %s+cluster:// for a Cluster (%s) or %s+sentinel:// for Sentinel (%s)",
			len(u.Addrs), u.Scheme, u.Scheme, examples[Cluster], u.Scheme, examples[Sentinel])
	}

	// The path.
	path := strings.TrimSuffix(strings.TrimPrefix(p.path, "/"), "/")
	switch u.Kind {
	case Node:
		if u.DB, err = database(path); err != nil {
			return nil, errors.New("the path must be a database number, like /0")
		}
	case Cluster:
		if path != "" && path != "0" {
			return nil, errors.New("has a path, but a Cluster has only database 0; drop the path, as in " + example)
		}
	case Sentinel:
		segs := strings.Split(path, "/")
		if path == "" {
			return nil, errors.New("names no master: put the name the sentinels know it by in the path, as in " + example)
		}
		if len(segs) > 2 || slices.Contains(segs, "") {
			return nil, errors.New("the path must be /MASTER or /MASTER/DB, as in " + example)
		}
		if u.Master, err = url.PathUnescape(segs[0]); err != nil || strings.ContainsAny(u.Master, " \t\r\n") {
			return nil, fmt.Errorf("the master name %q is not valid: it has no spaces, and a '%%' is written %%25", segs[0])
		}
		if len(segs) == 2 {
			if u.DB, err = database(segs[1]); err != nil {
				return nil, fmt.Errorf("the database after the master name must be a number, like /%s/0", segs[0])
			}
		}
	}

	// The options.
	q, err := url.ParseQuery(p.query)
	if err != nil {
		return nil, errors.New("the options after '?' are not valid: percent-encode '%', '&', ';' and '=' in their values")
	}
	if err := refuseOptions(u, q); err != nil {
		return nil, err
	}
	one := func(name string) (string, error) {
		vs, ok := q[name]
		delete(q, name)
		if len(vs) > 1 {
			return "", fmt.Errorf("the option %s is given %d times", name, len(vs))
		}
		if ok {
			return vs[0], nil
		}
		return "", nil
	}
	if u.Kind == Sentinel {
		if u.sentinelUsername, err = one("sentinel_username"); err != nil {
			return nil, err
		}
		if u.sentinelPassword, err = one("sentinel_password"); err != nil {
			return nil, err
		}
	}
	var tlsConf *tls.Config
	_, hasSkip := q["skip_verify"]
	_, hasName := q["tls_server_name"]
	if !u.TLS && (hasSkip || hasName) {
		return nil, fmt.Errorf("the options skip_verify and tls_server_name are for TLS: use %s", strings.Replace(u.Scheme, "redis", "rediss", 1))
	}
	if u.TLS {
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
		if u.Kind == Node {
			tlsConf.ServerName, _, _ = net.SplitHostPort(u.Addrs[0])
		}
		name, err := one("tls_server_name")
		if err != nil {
			return nil, err
		}
		if hasName {
			if name == "" || strings.ContainsAny(name, " /:@") {
				return nil, errors.New("the option tls_server_name must be a host name")
			}
			tlsConf.ServerName = name
		}
		skip, err := one("skip_verify")
		if err != nil {
			return nil, err
		}
		switch skip {
		case "true", "1":
			tlsConf.InsecureSkipVerify = true
		case "false", "0", "":
		default:
			return nil, fmt.Errorf("the option skip_verify must be true or false, not %q", skip)
		}
	}

	// go-redis checks the other options. It sees no credentials, so its
	// errors cannot quote them.
	base := "redis://" + u.Addrs[0]
	if u.DB != 0 {
		base += "/" + strconv.Itoa(u.DB)
	}
	if len(q) > 0 {
		base += "?" + q.Encode()
	}
	switch u.Kind {
	case Node:
		o, err := goredis.ParseURL(base)
		if err != nil {
			return nil, optionError(err)
		}
		o.Username, o.Password, o.TLSConfig = u.username, u.password, tlsConf
		lean(q, &o.ReadBufferSize, &o.WriteBufferSize, &o.PipelineReadBufferSize, &o.PipelineWriteBufferSize, &o.ConnMaxIdleTime)
		u.node = o
	case Cluster:
		o, err := goredis.ParseClusterURL(base)
		if err != nil {
			return nil, optionError(err)
		}
		o.Addrs = slices.Clone(u.Addrs)
		o.Username, o.Password, o.TLSConfig = u.username, u.password, tlsConf
		lean(q, &o.ReadBufferSize, &o.WriteBufferSize, &o.PipelineReadBufferSize, &o.PipelineWriteBufferSize, &o.ConnMaxIdleTime)
		u.cluster = o
	case Sentinel:
		o, err := goredis.ParseFailoverURL(base)
		if err != nil {
			return nil, optionError(err)
		}
		o.SentinelAddrs = slices.Clone(u.Addrs)
		o.MasterName, o.DB = u.Master, u.DB
		o.Username, o.Password = u.username, u.password
		o.SentinelUsername, o.SentinelPassword = u.sentinelUsername, u.sentinelPassword
		o.TLSConfig = tlsConf
		lean(q, &o.ReadBufferSize, &o.WriteBufferSize, &o.PipelineReadBufferSize, &o.PipelineWriteBufferSize, &o.ConnMaxIdleTime)
		u.failover = o
	}
	return u, nil
}

// lean sizes a client for firstmate's traffic, where the URL does not say
// otherwise: small commands and replies (a history is the largest, tens of
// kilobytes, read in a few fills), so 8 KiB buffers rather than go-redis's
// 32 KiB, and 16 KiB for pipelines rather than 128 KiB; and connections
// idle for a minute are closed, rather than after 30, so that a burst
// leaves no pool behind. Each connection then holds 16 KiB instead of 64
// (160 on the pipeline pool).
func lean(q url.Values, read, write, pipeRead, pipeWrite *int, idle *time.Duration) {
	if !q.Has("pipeline_read_buffer_size") {
		*pipeRead = 16 << 10
	}
	if !q.Has("pipeline_write_buffer_size") {
		*pipeWrite = 16 << 10
	}
	*read, *write = 8<<10, 8<<10
	if !q.Has("conn_max_idle_time") && !q.Has("idle_timeout") {
		*idle = time.Minute
	}
}

// refuseOptions refuses the options that other clients' URL forms use
// for what this form says elsewhere, so that no URL has two readings.
func refuseOptions(u *URL, q url.Values) error {
	for _, name := range slices.Sorted(maps.Keys(q)) {
		var msg string
		switch name {
		case "addr", "addrs":
			msg = "list every host before the path, separated by commas, as in " + examples[max(u.Kind, Cluster)]
		case "cluster":
			msg = "for a Cluster, use the scheme redis+cluster (or rediss+cluster), as in " + examples[Cluster]
		case "master_name", "master", "sentinel", "sentinel_master", "service_name":
			msg = "for Sentinel, use the scheme redis+sentinel (or rediss+sentinel) and put the master's name in the path, as in " + examples[Sentinel]
		case "username", "password", "user":
			msg = "put the user name and password before the host (user:password@host), not in an option"
		case "db", "database":
			msg = "put the database number in the path (/0), not in an option"
		case "sentinel_username", "sentinel_password":
			if u.Kind != Sentinel {
				msg = "it is for redis+sentinel:// (or rediss+sentinel://) URLs only"
			}
		}
		if msg != "" {
			return fmt.Errorf("the option %s is not accepted: %s", name, msg)
		}
	}
	return nil
}

// optionError rewords go-redis's error about the options.
func optionError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "redis: ")
	if rest, ok := strings.CutPrefix(msg, "unexpected option: "); ok {
		msg = "unknown option " + rest
	}
	return errors.New("the options after '?' are not valid: " + msg)
}

// database parses a database number; "" is 0.
func database(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("not a number")
		}
	}
	return strconv.Atoi(s)
}

// hostPort checks one host[:port] of the host list and returns it as
// host:port.
func hostPort(h, defPort string) (string, error) {
	if h == "" {
		return "", errors.New("has an empty host in its list of hosts (two commas in a row, or one at an end)")
	}
	var host, port string
	hasPort := false
	switch {
	case strings.HasPrefix(h, "["):
		end := strings.Index(h, "]")
		if end < 0 {
			return "", fmt.Errorf("host %q: an IPv6 address in brackets lacks its ']'", h)
		}
		host = h[1:end]
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return "", fmt.Errorf("host %q: the brackets must hold an IPv6 address", h)
		}
		rest := h[end+1:]
		if rest != "" {
			if port, hasPort = strings.CutPrefix(rest, ":"); !hasPort {
				return "", fmt.Errorf("host %q: write the port after the brackets, as in [::1]:6379", h)
			}
		}
	case strings.Count(h, ":") > 1:
		return "", fmt.Errorf("host %q: put an IPv6 address in brackets, as in [::1]:6379", h)
	default:
		host, port, hasPort = strings.Cut(h, ":")
		if !validHostName(host) {
			return "", fmt.Errorf("host %q is not a host name or an IP address", h)
		}
	}
	if !hasPort {
		port = defPort
	} else if n, err := database(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("host %q: the port must be a number from 1 to 65535", h)
	}
	return net.JoinHostPort(host, port), nil
}

func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}

// Redact returns raw with its passwords (the user info's, and the value of
// any option whose name holds "password") replaced by "xxxxx", as
// url.URL.Redacted does. It returns "" if raw cannot be split into its
// parts, since a password could then not be told apart; it does not
// otherwise check raw.
func Redact(raw string) string {
	p, err := split(raw)
	if err != nil {
		return ""
	}
	var b strings.Builder
	scheme, _, _ := strings.Cut(raw, "://")
	b.WriteString(scheme + "://")
	authority := raw[len(scheme)+3:]
	if i := strings.IndexAny(authority, "/?"); i >= 0 {
		authority = authority[:i]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user, _, _ := strings.Cut(authority[:at], ":")
		b.WriteString(user)
		if p.hasPassword {
			b.WriteString(":xxxxx")
		}
		b.WriteString("@")
	}
	b.WriteString(p.hosts)
	b.WriteString(p.path)
	if p.query != "" || strings.Contains(raw, "?") {
		b.WriteString("?")
		for i, kv := range strings.Split(p.query, "&") {
			if i > 0 {
				b.WriteString("&")
			}
			k, _, hasValue := strings.Cut(kv, "=")
			if name, err := url.QueryUnescape(k); hasValue && (err != nil || strings.Contains(strings.ToLower(name), "password")) {
				kv = k + "=xxxxx"
			}
			b.WriteString(kv)
		}
	}
	return b.String()
}

// Secrets returns the passwords in raw (decoded): the user info's and the
// values of options whose names hold "password". It does not otherwise
// check raw, and returns nothing if raw cannot be split into its parts.
func Secrets(raw string) []string {
	p, err := split(raw)
	if err != nil {
		return nil
	}
	var out []string
	if p.password != "" {
		out = append(out, p.password)
		if p.rawPassword != p.password {
			out = append(out, p.rawPassword)
		}
	}
	for kv := range strings.SplitSeq(p.query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil || !strings.Contains(strings.ToLower(name), "password") || v == "" {
			continue
		}
		out = append(out, v)
		if d, err := url.QueryUnescape(v); err == nil && d != v {
			out = append(out, d)
		}
	}
	return out
}
