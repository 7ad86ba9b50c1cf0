package redisurl

import (
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func TestParseGood(t *testing.T) {
	for _, tc := range []struct {
		url    string
		kind   Kind
		tls    bool
		addrs  []string
		db     int
		master string
		desc   string
		check  func(t *testing.T, u *URL)
	}{
		{url: "redis://localhost", kind: Node, addrs: []string{"localhost:6379"},
			desc: "Redis node localhost:6379, db 0",
			check: func(t *testing.T, u *URL) {
				if o := u.Options(); o.Addr != "localhost:6379" || o.TLSConfig != nil || o.Password != "" {
					t.Errorf("options: addr %q, TLS %v", o.Addr, o.TLSConfig != nil)
				}
			}},
		{url: "rediss://alice:s3cret@redis.example.com:6380/3", kind: Node, tls: true, addrs: []string{"redis.example.com:6380"}, db: 3,
			desc: "Redis node redis.example.com:6380, db 3, TLS",
			check: func(t *testing.T, u *URL) {
				o := u.Options()
				if o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.example.com" || o.TLSConfig.InsecureSkipVerify {
					t.Errorf("TLS config %+v", o.TLSConfig)
				}
				if o.Addr != "redis.example.com:6380" || o.DB != 3 || o.Username != "alice" || o.Password != "s3cret" {
					t.Errorf("parsed %q, db %d, user %q, password %q", o.Addr, o.DB, o.Username, o.Password)
				}
			}},
		{url: "REDIS://h:1/", kind: Node, addrs: []string{"h:1"}},
		{url: "redis://[::1]:7000/2?dial_timeout=3s&pool_size=7", kind: Node, addrs: []string{"[::1]:7000"}, db: 2,
			check: func(t *testing.T, u *URL) {
				if o := u.Options(); o.DialTimeout != 3*time.Second || o.PoolSize != 7 || o.Addr != "[::1]:7000" {
					t.Errorf("options: dial timeout %v, pool size %d, addr %q", o.DialTimeout, o.PoolSize, o.Addr)
				}
			}},
		{url: "redis://u:p%40ss%2Fw%3A@h/0", kind: Node, addrs: []string{"h:6379"},
			check: func(t *testing.T, u *URL) {
				if o := u.Options(); o.Username != "u" || o.Password != "p@ss/w:" {
					t.Errorf("user %q, password %q", o.Username, o.Password)
				}
			}},
		{url: "rediss://h?skip_verify=true&tls_server_name=redis.internal", kind: Node, tls: true, addrs: []string{"h:6379"},
			check: func(t *testing.T, u *URL) {
				if c := u.Options().TLSConfig; c.ServerName != "redis.internal" || !c.InsecureSkipVerify {
					t.Errorf("TLS config %+v", c)
				}
			}},
		{url: "redis+cluster://:s3cret@a:7000,b:7001,c/", kind: Cluster, addrs: []string{"a:7000", "b:7001", "c:6379"},
			desc: "Redis Cluster (seeds a:7000, b:7001, c:6379)",
			check: func(t *testing.T, u *URL) {
				o := u.cluster
				if !slices.Equal(o.Addrs, u.Addrs) || o.Password != "s3cret" || o.TLSConfig != nil {
					t.Errorf("cluster options: addrs %v, password %q, TLS %v", o.Addrs, o.Password, o.TLSConfig != nil)
				}
			}},
		{url: "redis+cluster://h/0", kind: Cluster, addrs: []string{"h:6379"}},
		{url: "rediss+cluster://u:p@a:1,b:2?dial_timeout=3s&tls_server_name=redis.internal&max_redirects=5", kind: Cluster, tls: true, addrs: []string{"a:1", "b:2"},
			desc: "Redis Cluster (seeds a:1, b:2), TLS",
			check: func(t *testing.T, u *URL) {
				o := u.cluster
				if o.DialTimeout != 3*time.Second || o.MaxRedirects != 5 || o.Username != "u" || o.Password != "p" {
					t.Errorf("cluster options: %+v", o)
				}
				if o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.internal" {
					t.Errorf("TLS config %+v", o.TLSConfig)
				}
			}},
		{url: "rediss+cluster://a,b", kind: Cluster, tls: true, addrs: []string{"a:6379", "b:6379"},
			check: func(t *testing.T, u *URL) {
				// Each node is checked against the address dialed.
				if c := u.cluster.TLSConfig; c == nil || c.ServerName != "" {
					t.Errorf("TLS config %+v", c)
				}
			}},
		{url: "redis+sentinel://:m-s3cret@s1,s2:26380/mymaster/2?sentinel_password=s-s3cret&dial_timeout=2", kind: Sentinel,
			addrs: []string{"s1:26379", "s2:26380"}, db: 2, master: "mymaster",
			desc: `Redis Sentinel master "mymaster" (sentinels s1:26379, s2:26380), db 2`,
			check: func(t *testing.T, u *URL) {
				o := u.failover
				if !slices.Equal(o.SentinelAddrs, u.Addrs) || o.MasterName != "mymaster" || o.DB != 2 || o.DialTimeout != 2*time.Second {
					t.Errorf("failover options: %+v", o)
				}
				if o.Password != "m-s3cret" || o.Username != "" || o.SentinelPassword != "s-s3cret" || o.SentinelUsername != "" {
					t.Errorf("credentials: user %q password %q, sentinel user %q password %q", o.Username, o.Password, o.SentinelUsername, o.SentinelPassword)
				}
				if !u.HasPassword() {
					t.Error("HasPassword = false")
				}
			}},
		{url: "redis+sentinel://s1/m?sentinel_username=su&sentinel_password=sp", kind: Sentinel, addrs: []string{"s1:26379"}, master: "m",
			check: func(t *testing.T, u *URL) {
				if o := u.failover; o.Password != "" || o.SentinelUsername != "su" || o.SentinelPassword != "sp" {
					t.Errorf("credentials: %+v", o)
				}
			}},
		{url: "rediss+sentinel://s1:1/my%2Dmaster/?skip_verify=1", kind: Sentinel, tls: true, addrs: []string{"s1:1"}, master: "my-master",
			check: func(t *testing.T, u *URL) {
				if c := u.failover.TLSConfig; c == nil || !c.InsecureSkipVerify || c.ServerName != "" {
					t.Errorf("TLS config %+v", c)
				}
			}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			u, err := Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if u.Kind != tc.kind || u.TLS != tc.tls || !slices.Equal(u.Addrs, tc.addrs) || u.DB != tc.db || u.Master != tc.master {
				t.Errorf("parsed as %v TLS %v addrs %v db %d master %q", u.Kind, u.TLS, u.Addrs, u.DB, u.Master)
			}
			if tc.desc != "" && u.String() != tc.desc {
				t.Errorf("String() = %q, want %q", u.String(), tc.desc)
			}
			if strings.Contains(u.String(), "s3cret") {
				t.Errorf("String() shows a password: %s", u)
			}
			if tc.check != nil {
				tc.check(t, u)
			}
			c := u.NewClient()
			defer c.Close()
			switch c.(type) {
			case *goredis.ClusterClient:
				if u.Kind != Cluster {
					t.Errorf("a %v URL made a Cluster client", u.Kind)
				}
			case *goredis.Client:
				if u.Kind == Cluster {
					t.Error("a Cluster URL made a single client")
				}
			default:
				t.Errorf("client %T", c)
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "is empty"},
		{"localhost:6379", `"localhost:6379" has no scheme; use redis://localhost:6379`},
		{":s3cret@localhost:6379", "has no scheme; write it like redis://"},
		{"http://:s3cret@h", `the scheme must be redis or rediss (TLS) for one node, redis+cluster or rediss+cluster for a Cluster, redis+sentinel or rediss+sentinel for Sentinel, not "http"`},
		{"redis-cluster://:s3cret@h", "the scheme must be"},
		{"s3cret@h://x", "is not a valid URL"},
		{"redis://:s3cret@", "has no host; write it like redis://"},
		{"redis+sentinel://:s3cret@/m", "has no host; write it like redis+sentinel://"},
		{"redis://:s3cret@a,b", "names 2 hosts, and redis:// is one node: use redis+cluster:// for a Cluster"},
		{"rediss://:s3cret@a,b", "use rediss+cluster://"},
		{"redis+cluster://:s3cret@a,,b", "has an empty host"},
		{"redis+cluster://:s3cret@a,b,", "has an empty host"},
		{"redis+cluster://:s3cret@a:0", `host "a:0": the port must be a number from 1 to 65535`},
		{"redis://:s3cret@h:", `host "h:": the port must be`},
		{"redis://:s3cret@h:x1", `host "h:x1": the port must be`},
		{"redis://:s3cret@bad host:6379/0", `host "bad host:6379" is not a host name or an IP address`},
		{"redis://:s3cret@::1:6379", "put an IPv6 address in brackets"},
		{"redis://:s3cret@[::1", "lacks its ']'"},
		{"redis://:s3cret@[1.2.3.4]:1", "must hold an IPv6 address"},
		{"redis://:s3cret@[::1]6379", "write the port after the brackets"},
		{"redis://:s3cret@h/notadb", "the path must be a database number, like /0"},
		{"redis://:s3cret@h/-1", "the path must be a database number"},
		{"redis://:s3cret@h/0/1", "the path must be a database number"},
		{"redis+cluster://:s3cret@h/3", "a Cluster has only database 0"},
		{"redis+sentinel://:s3cret@h", "names no master"},
		{"redis+sentinel://:s3cret@h/", "names no master"},
		{"redis+sentinel://:s3cret@h/m/x", "the database after the master name must be a number, like /m/0"},
		{"redis+sentinel://:s3cret@h/m/0/1", "the path must be /MASTER or /MASTER/DB"},
		{"redis+sentinel://:s3cret@h//0", "the path must be /MASTER or /MASTER/DB"},
		{"redis+sentinel://:s3cret@h/m%20x", "the master name \"m%20x\" is not valid"},
		{"redis://:s3cret@h?cluster=true", "the option cluster is not accepted: for a Cluster, use the scheme redis+cluster"},
		{"redis://:s3cret@a?addr=b:6379", "the option addr is not accepted: list every host before the path"},
		{"redis+cluster://:s3cret@a?addr=b:6379", "the option addr is not accepted"},
		{"redis://:s3cret@h?master_name=m", "the option master_name is not accepted: for Sentinel, use the scheme redis+sentinel"},
		{"redis+sentinel://h/m?master_name=m", "the option master_name is not accepted"},
		{"redis://h?password=s3cret", "the option password is not accepted: put the user name and password before the host"},
		{"redis+sentinel://h/m?username=u&password=s3cret", "the option password is not accepted"},
		{"redis://:s3cret@h?db=2", "the option db is not accepted: put the database number in the path"},
		{"redis://h?sentinel_password=s3cret", "the option sentinel_password is not accepted: it is for redis+sentinel://"},
		{"redis+cluster://h?sentinel_password=s3cret", "the option sentinel_password is not accepted"},
		{"redis+sentinel://h/m?sentinel_password=a&sentinel_password=s3cret", "the option sentinel_password is given 2 times"},
		{"redis://:s3cret@h?dial_timeout=abc", "the options after '?' are not valid: invalid dial_timeout duration"},
		{"redis://:s3cret@h?bogus=1&zany=2", "the options after '?' are not valid: unknown option bogus, zany"},
		{"redis+cluster://:s3cret@h?bogus=1", "unknown option bogus"},
		{"redis+sentinel://:s3cret@h/m?bogus=1", "unknown option bogus"},
		{"redis://:s3c/ret@h", "has an '@' after the host"},
		{"redis://:s3c?ret@h", "has an '@' after the host"},
		{"redis://:s3c#ret@h", "contains a '#'"},
		{"redis://:s3c%zzret@h", "the user name or password has an invalid %-escape"},
		{"redis://:s3cret@h?x=%zz", "the options after '?' are not valid: percent-encode"},
		{"redis://:s3cret@h?skip_verify=true", "the options skip_verify and tls_server_name are for TLS: use rediss"},
		{"redis+cluster://:s3cret@h?tls_server_name=x", "are for TLS: use rediss+cluster"},
		{"rediss://:s3cret@h?skip_verify=maybe", `the option skip_verify must be true or false, not "maybe"`},
		{"rediss+sentinel://:s3cret@h/m?tls_server_name=", "the option tls_server_name must be a host name"},
		{"redis://:s3cret@h\n", "contains a control character"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := Parse(tc.url)
			if err == nil {
				t.Fatal("parsed")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to hold %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3c") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://localhost:6379/0", "redis://localhost:6379/0"},
		{"rediss://u:s3cret@h:6380/2", "rediss://u:xxxxx@h:6380/2"},
		{"redis://:s3cret@h", "redis://:xxxxx@h"},
		{"redis://u@h", "redis://u@h"},
		{"redis+sentinel://u:s3cret@a,b:1/m/0?sentinel_password=s3cret2&dial_timeout=3", "redis+sentinel://u:xxxxx@a,b:1/m/0?sentinel_password=xxxxx&dial_timeout=3"},
		{"redis+cluster://:s3cret@[::1]:1,[::2]:2?password=s3cret", "redis+cluster://:xxxxx@[::1]:1,[::2]:2?password=xxxxx"},
		{"redis://:s3c/ret@h", ""},
		{"redis://:s3c#ret@h", ""},
		{"s3cret", ""},
	} {
		if got := Redact(tc.url); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

func TestSecrets(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"redis://localhost", nil},
		{"redis://u@h", nil},
		{"rediss://u:s3cret@h", []string{"s3cret"}},
		{"redis://:p%40ss@h", []string{"p@ss", "p%40ss"}},
		{"redis+sentinel://:m@a,b/m?sentinel_password=s%2Bp&dial_timeout=1", []string{"m", "s%2Bp", "s+p"}},
		{"redis://:s3c/ret@h", nil},
	} {
		if got := Secrets(tc.url); !slices.Equal(got, tc.want) {
			t.Errorf("Secrets(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

// A client is sized for small commands unless the URL says otherwise.
func TestLeanDefaults(t *testing.T) {
	u, err := Parse("redis://127.0.0.1:6379/0")
	if err != nil {
		t.Fatal(err)
	}
	o := u.Options()
	if o.ReadBufferSize != 8<<10 || o.WriteBufferSize != 8<<10 || o.PipelineReadBufferSize != 16<<10 || o.ConnMaxIdleTime != time.Minute {
		t.Errorf("defaults: read %d write %d pipeline read %d idle %v", o.ReadBufferSize, o.WriteBufferSize, o.PipelineReadBufferSize, o.ConnMaxIdleTime)
	}
	u, err = Parse("redis://127.0.0.1:6379/0?conn_max_idle_time=5m&pipeline_read_buffer_size=131072")
	if err != nil {
		t.Fatal(err)
	}
	if o := u.Options(); o.ConnMaxIdleTime != 5*time.Minute || o.PipelineReadBufferSize != 131072 {
		t.Errorf("the URL's settings were overridden: idle %v pipeline read %d", o.ConnMaxIdleTime, o.PipelineReadBufferSize)
	}
}
