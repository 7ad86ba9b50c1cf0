// Package redis is firstmate's production store: agent.Store on Redis through
// a go-redis v9 UniversalClient (single node, Sentinel or Cluster), safe for
// many replicas sharing one Redis.
//
// Steps that touch several keys are Lua scripts, so they are atomic, and all
// the keys a script touches share one Cluster slot (see Store.key). Most
// Store methods are one round trip; the exceptions:
//
//   - Enqueue, and Commit with an outbox entry, also put the session in the
//     ready set, whose keys sit in a slot of their own. The ready set's
//     script must run after the session's (see Ready), so on one node (or
//     Sentinel) the two go in one pipeline, which Redis runs in order: one
//     round trip. On a Cluster or a Ring they are two.
//   - Ready is two round trips per page of the ready set it reads (the
//     page, then every session on it in one pipeline), and one more when
//     it removes sessions it found empty.
//   - AuditLog is one per page of the log it reads.
//
// A dispatcher turn (Enqueue, Claim, Commit with the answer, Delivered,
// Release) therefore costs five round trips on one node, seven on a
// Cluster, however long the session is.
//
// Every key expires except a channel's settings and the grants, which hold
// until an admin changes them, the audit log, which is capped by length
// instead, the ready set, which Ready keeps to the sessions with work, and
// the boot counters (see the record kinds in keys.go). Durability of an
// acknowledged Enqueue is Redis's: run it with appendonly (AOF) when losing
// the last second of messages on a crash matters.
package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/internal/storejson"
	"github.com/firstmate/firstmate/store/internal/storelease"
	"github.com/firstmate/firstmate/store/redis/redisurl"
	"github.com/firstmate/firstmate/tools"
)

// Options configure a Store.
type Options struct {
	// Prefix starts every key, so several deployments can share a Redis.
	// DefaultPrefix if empty. It must not contain '{' or '}'.
	Prefix string
	// Retention bounds what is kept; zero fields take agent.DefaultRetention.
	Retention agent.Retention
	// AuditCap is how many audit entries are kept (the newest);
	// storegov.DefaultAuditCap (100000) if 0.
	AuditCap int
}

// Store is an agent.Store on Redis.
type Store struct {
	client   goredis.UniversalClient
	prefix   string
	ret      agent.Retention
	auditCap int
	// ordered is true when a pipeline runs its commands in order on one
	// server (a single node or Sentinel), not spread over shards.
	ordered bool
	// desc is what Describe reports.
	desc string
}

// The roles the store plays: the dispatcher's sessions, the gate's
// governance, schedules, the background jobs' board.
var (
	_ agent.Sessions  = (*Store)(nil)
	_ govern.Store    = (*Store)(nil)
	_ schedules.Store = (*Store)(nil)
	_ tools.JobBoard  = (*Store)(nil)
)

// New returns a Store on client, which it owns from then on: Close closes it.
// It panics if opts.Prefix contains a brace; Open reports that as an error.
func New(client goredis.UniversalClient, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if err := checkPrefix(opts.Prefix); err != nil {
		panic(err)
	}
	if opts.AuditCap <= 0 {
		opts.AuditCap = storegov.DefaultAuditCap
	}
	_, ordered := client.(*goredis.Client)
	desc := "Redis"
	switch client.(type) {
	case *goredis.ClusterClient:
		desc = "Redis Cluster"
	case *goredis.Ring:
		desc = "Redis Ring"
	}
	return &Store{client: client, prefix: opts.Prefix, ret: opts.Retention.WithDefaults(), auditCap: opts.AuditCap, ordered: ordered, desc: desc}
}

// Open connects to the Redis that url names (REDIS_URL) and returns a Store
// on it once it answers. url is one of (see package redisurl):
//
//	redis://[user:password@]host[:port][/db]                 one node
//	redis+cluster://[user:password@]host1:port1,host2:port2  a Redis Cluster
//	redis+sentinel://[user:password@]host1:port1,host2:port2/master[/db]
//	                                                          a Sentinel-managed master
//
// with rediss, rediss+cluster and rediss+sentinel for TLS. It checks that
// the servers are of the kind the URL names: a single node that turns out
// to be a sentinel or a node of a Cluster of several masters, a Sentinel
// master that is not a master, and a Cluster URL that reaches a server
// without Cluster support or a Cluster whose state is not ok, are errors. Describe reports what it connected to. Its errors never quote the
// URL, which may hold a password.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if err := checkPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	u, err := redisurl.Parse(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	c := u.NewClient()
	desc, err := connect(ctx, c, u)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	s := New(c, opts)
	s.desc = desc
	return s, nil
}

// connect pings the servers u names through c, checks that they are of
// u's kind and returns a description of what it reached.
func connect(ctx context.Context, c goredis.UniversalClient, u *redisurl.URL) (string, error) {
	if err := c.Ping(ctx).Err(); err != nil {
		if u.Kind == redisurl.Cluster && strings.Contains(err.Error(), "cluster support disabled") {
			return "", fmt.Errorf("%s: the server is not a Cluster node (its cluster support is disabled); for one node, use %s://", u, strings.TrimSuffix(u.Scheme, "+cluster"))
		}
		if u.Kind == redisurl.Sentinel && strings.Contains(err.Error(), "sentinels specified in configuration are unreachable") {
			msg := err.Error()
			switch {
			case strings.Contains(msg, "unknown command 'sentinel'"):
				return "", fmt.Errorf("%s: the host is not a sentinel (it knows no SENTINEL command); for one node, use %s://", u, strings.TrimSuffix(u.Scheme, "+sentinel"))
			case strings.HasSuffix(msg, goredis.Nil.Error()):
				return "", fmt.Errorf("%s: the sentinels monitor no master named %q", u, u.Master)
			case strings.Contains(msg, "NOAUTH"):
				return "", fmt.Errorf("%s: the sentinels want a password: give it as ?sentinel_password=...: %w", u, err)
			}
		}
		return "", fmt.Errorf("no answer from %s: %w", u, err)
	}
	switch u.Kind {
	case redisurl.Node, redisurl.Sentinel:
		// INFO may be disabled (renamed) on a managed Redis: then the
		// check is skipped.
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return u.String(), nil
		}
		switch mode := infoField(info, "redis_mode"); mode {
		case "cluster":
			// A Cluster of one master serving every slot works through a
			// single-node client (some managed Redis offer just that);
			// with more, most keys would be MOVED elsewhere.
			ci, err := c.ClusterInfo(ctx).Result()
			if err == nil && infoField(ci, "cluster_state") == "ok" && infoField(ci, "cluster_size") == "1" && infoRole(ctx, c) == "master" {
				return u.String() + " (a Cluster of one master)", nil
			}
			return "", fmt.Errorf("%s: the server is a Redis Cluster node; use %s+cluster://host1:port1,host2:port2", u, strings.TrimSuffix(u.Scheme, "+sentinel"))
		case "sentinel":
			if u.Kind == redisurl.Node {
				return "", fmt.Errorf("%s: the server is a sentinel; use %s+sentinel://host:port/MASTER, with the name it monitors the master by", u, u.Scheme)
			}
			return "", fmt.Errorf("%s: the master the sentinels named is itself a sentinel", u)
		}
		if u.Kind == redisurl.Sentinel {
			if role := infoRole(ctx, c); role != "" && role != "master" {
				return "", fmt.Errorf("%s: the server the sentinels named as master is a %s", u, role)
			}
		}
		return u.String(), nil
	default: // Cluster
		info, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return "", fmt.Errorf("%s: CLUSTER INFO: %w", u, err)
		}
		if state := infoField(info, "cluster_state"); state != "ok" {
			return "", fmt.Errorf("%s: the Cluster's state is %q, not ok (are all slots served?)", u, state)
		}
		masters := infoField(info, "cluster_size") + " masters"
		if masters == "1 masters" {
			masters = "1 master"
		}
		return u.String() + ", " + masters, nil
	}
}

// infoField returns the value of name in an INFO reply ("name:value"
// lines).
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// infoRole returns the server's role (master, slave), "" if unknown.
func infoRole(ctx context.Context, c goredis.UniversalClient) string {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return ""
	}
	return infoField(info, "role")
}

// Describe reports what the store is on: for a Store from Open, the kind
// of deployment and its addresses ("Redis node redis:6379, db 0", "Redis
// Cluster (seeds a:6379, b:6379), 3 masters", "Redis Sentinel master
// "mymaster" (sentinels a:26379, b:26379), db 0", with ", TLS" when it
// is), never a password.
func (s *Store) Describe() string { return s.desc }

// parseURL parses a REDIS_URL that names one node, for the tests' own
// clients. Its errors never quote the URL, which may hold a password.
func parseURL(raw string) (*goredis.Options, error) {
	u, err := redisurl.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	if u.Kind != redisurl.Node {
		return nil, fmt.Errorf("REDIS_URL: %s: want one node (redis:// or rediss://)", u)
	}
	return u.Options(), nil
}

// Close closes the client.
func (s *Store) Close() error { return s.client.Close() }

// Enqueue implements agent.Store.
func (s *Store) Enqueue(ctx context.Context, in agent.Inbound) (added bool, err error) {
	if err := in.Validate(); err != nil {
		return false, err
	}
	data, err := storejson.Marshal(in)
	if err != nil {
		return false, err
	}
	keys := []string{
		s.key(dedup, in.Key, in.MessageID), s.key(mailbox, in.Key, ""), s.key(history, in.Key, ""),
		s.key(outbox, in.Key, ""), s.key(lease, in.Key, ""), s.key(claimed, in.Key, ""),
	}
	// The session is put in the ready set after a duplicate too: if a
	// crash came between the script and the touch, the platform's
	// re-delivery repairs it.
	cmd, err := s.runAndTouch(ctx, enqueueScript, keys, []any{ms(s.ret.DedupTTL), data, ms(s.ret.HistoryTTL), in.Seq}, in.Key)
	if err != nil {
		return false, fmt.Errorf("redis enqueue: %w", err)
	}
	n, err := cmd.Int()
	if err != nil {
		return false, fmt.Errorf("redis enqueue: %w", err)
	}
	return n == 1, nil
}

// runAndTouch runs sc and then puts key's session in the ready set, and
// returns sc's reply. The touch must come after the script: Ready removes
// a session that it found empty and that was not touched since, so a
// touch that ran first, then Ready, then the script, would leave a
// session with work out of the set.
func (s *Store) runAndTouch(ctx context.Context, sc *goredis.Script, keys []string, args []any, key agent.SessionKey) (*goredis.Cmd, error) {
	member := key.String()
	if s.ordered {
		var cmd, touch *goredis.Cmd
		// Errors are per command; Pipelined's is the first of them.
		_, _ = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			cmd = sc.EvalSha(ctx, p, keys, args...)
			touch = touchScript.EvalSha(ctx, p, s.readyKeys(), member)
			return nil
		})
		switch err := cmd.Err(); {
		case isNoScript(err):
			// Redis lost its script cache (a restart, a failover); the
			// touch came first, so it is done again below.
		case err != nil:
			return nil, err
		case isNoScript(touch.Err()):
			return cmd, touchScript.Run(ctx, s.client, s.readyKeys(), member).Err()
		default:
			return cmd, touch.Err()
		}
	}
	cmd := sc.Run(ctx, s.client, keys, args...)
	if err := cmd.Err(); err != nil {
		return nil, err
	}
	return cmd, touchScript.Run(ctx, s.client, s.readyKeys(), member).Err()
}

func isNoScript(err error) bool { return err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") }

// Seen implements agent.Store. It shares Enqueue's dedup records, so a
// message is first either as a command or as a mailbox entry, never both.
func (s *Store) Seen(ctx context.Context, in agent.Inbound) (first bool, err error) {
	if err := in.Validate(); err != nil {
		return false, err
	}
	first, err = s.client.SetNX(ctx, s.key(dedup, in.Key, in.MessageID), "1", s.ret.DedupTTL).Result()
	if err != nil {
		return false, fmt.Errorf("redis seen: %w", err)
	}
	return first, nil
}

// Claim implements agent.Store.
func (s *Store) Claim(ctx context.Context, key agent.SessionKey, owner string, ttl time.Duration) (*agent.Claim, error) {
	if err := agent.ValidateLease(key, owner, ttl); err != nil {
		return nil, err
	}
	keys := append(s.sessionKeys(key), s.key(settings, key.Channel(), ""))
	res, err := claimScript.Run(ctx, s.client, keys, owner, ms(ttl)).Slice()
	if errors.Is(err, goredis.Nil) {
		return nil, agent.ErrLeaseHeld
	}
	if err != nil {
		return nil, fmt.Errorf("redis claim: %w", err)
	}
	if len(res) != 4 {
		return nil, fmt.Errorf("redis claim: script returned %d values", len(res))
	}
	c := &agent.Claim{}
	if c.Mailbox, err = decodeMailbox(res[0]); err != nil {
		return nil, fmt.Errorf("redis claim: %w", err)
	}
	if c.History, err = decodeHistory(res[1]); err != nil {
		return nil, fmt.Errorf("redis claim: %w", err)
	}
	if c.Outbox, err = decodeOutbox(res[2]); err != nil {
		return nil, fmt.Errorf("redis claim: %w", err)
	}
	cs := agent.ChannelSettings{}
	if data, ok := res[3].(string); ok {
		if cs, err = storegov.DecodeSettings([]byte(data)); err != nil {
			return nil, fmt.Errorf("redis claim: settings: %w", err)
		}
	}
	c.Settings = &cs
	return c, nil
}

// Renew implements agent.Store.
func (s *Store) Renew(ctx context.Context, key agent.SessionKey, owner string, ttl time.Duration) error {
	if err := agent.ValidateLease(key, owner, ttl); err != nil {
		return err
	}
	n, err := renewScript.Run(ctx, s.client, []string{s.key(lease, key, ""), s.key(claimed, key, "")}, owner, ms(ttl)).Int()
	if err != nil {
		return fmt.Errorf("redis renew: %w", err)
	}
	if n != 1 {
		return agent.ErrLeaseLost
	}
	return nil
}

// Commit implements agent.Store.
func (s *Store) Commit(ctx context.Context, key agent.SessionKey, owner string, consumed int, turn []agent.Message, out *agent.Outbound) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storelease.CheckCommit(key, consumed, out); err != nil {
		return err
	}
	var data, outData []byte
	var err error
	if len(turn) > 0 {
		if data, err = storejson.Marshal(turn); err != nil {
			return err
		}
	}
	if out != nil {
		if outData, err = storejson.Marshal(out); err != nil {
			return err
		}
	}
	id, spent := "", agent.Spent{}
	if out != nil {
		id, spent = out.ID, out.Spent
	}
	keys := append(s.sessionKeys(key), s.key(usage, key, spent.Day))
	args := []any{owner, consumed, data, -s.ret.MaxTurns, ms(s.ret.HistoryTTL), outData, id, spent.Tokens, ms(storegov.UsageTTL)}
	var cmd *goredis.Cmd
	if out != nil {
		// A holder that dies before delivering leaves the entry to whoever
		// Ready shows the session to. (A touch after a Commit that failed
		// does no harm: Ready drops sessions with nothing to do.)
		cmd, err = s.runAndTouch(ctx, commitScript, keys, args, key)
	} else {
		cmd = commitScript.Run(ctx, s.client, keys, args...)
		err = cmd.Err()
	}
	if err != nil {
		return fmt.Errorf("redis commit: %w", err)
	}
	n, err := cmd.Int()
	if err != nil {
		return fmt.Errorf("redis commit: %w", err)
	}
	if n != 1 {
		return agent.ErrLeaseLost
	}
	return nil
}

// Release implements agent.Store.
func (s *Store) Release(ctx context.Context, key agent.SessionKey, owner, shown string) (pending int, err error) {
	if err := key.Validate(); err != nil {
		return 0, err
	}
	n, err := releaseScript.Run(ctx, s.client, s.sessionKeys(key), owner, shown).Int()
	if err != nil {
		return 0, fmt.Errorf("redis release: %w", err)
	}
	if n < 0 {
		return 0, agent.ErrLeaseLost
	}
	return n, nil
}

// Abandon implements agent.Store.
func (s *Store) Abandon(ctx context.Context, key agent.SessionKey, owner string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := abandonScript.Run(ctx, s.client, []string{s.key(lease, key, ""), s.key(claimed, key, "")}, owner).Err(); err != nil {
		return fmt.Errorf("redis abandon: %w", err)
	}
	return nil
}

// Delivered implements agent.Store.
func (s *Store) Delivered(ctx context.Context, key agent.SessionKey, id string) error {
	if err := storelease.CheckDelivered(key, id); err != nil {
		return err
	}
	if err := deliveredScript.Run(ctx, s.client, []string{s.key(outbox, key, "")}, id).Err(); err != nil {
		return fmt.Errorf("redis delivered: %w", err)
	}
	return nil
}

// Ready implements agent.Store. It reads the ready set a page at a time,
// longest waiting first, and looks at each session of the page in one
// pipeline: an EXISTS of its lease and one of its mailbox and outbox
// (Redis deletes an empty list, and one EXISTS of two keys is atomic, so
// a Commit moving work from the mailbox to the outbox cannot fall between
// two reads). It removes the sessions it found empty, each only if nobody
// touched it since the page was read (sweepScript): an Enqueue's touch
// follows its write, so either the write was seen or the touch keeps the
// session in the set. Leased sessions with work stay in the set for when
// their lease ends; the pages go on until limit sessions are found or the
// set ends (or readyPagesMax), so the cost is in the sessions with work
// pending, never in the idle ones.
func (s *Store) Ready(ctx context.Context, limit int) ([]agent.SessionKey, error) {
	if limit <= 0 {
		return nil, nil
	}
	page := min(max(limit, readyPageMin), readyPageMax)
	var found []agent.SessionKey
	for start, pages := 0, 1; ; pages++ {
		members, touches, err := s.readyPage(ctx, start, page)
		if err != nil {
			return nil, fmt.Errorf("redis ready: %w", err)
		}
		keys := make([]agent.SessionKey, len(members))
		valid := make([]bool, len(members))
		leased := make([]*goredis.IntCmd, len(members))
		work := make([]*goredis.IntCmd, len(members))
		_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, m := range members {
				k, err := agent.ParseSessionKey(m)
				if err != nil {
					continue // not this version's; swept below
				}
				keys[i], valid[i] = k, true
				leased[i] = p.Exists(ctx, s.key(lease, k, ""))
				work[i] = p.Exists(ctx, s.key(mailbox, k, ""), s.key(outbox, k, ""))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redis ready: %w", err)
		}
		var sweep []any
		for i, m := range members {
			switch {
			case !valid[i] || work[i].Val() == 0:
				sweep = append(sweep, m, touches[i])
			case leased[i].Val() == 0 && len(found) < limit:
				found = append(found, keys[i])
			}
		}
		removed := 0
		if len(sweep) > 0 {
			if removed, err = sweepScript.Run(ctx, s.client, s.readyKeys(), sweep...).Int(); err != nil {
				return nil, fmt.Errorf("redis ready: %w", err)
			}
		}
		if len(found) >= limit || len(members) < page || pages == readyPagesMax {
			return found, nil
		}
		// What was removed was on this page, so the next page starts that
		// much earlier. (A concurrent Ready's removals may make this one
		// skip a session: the next poll finds it.)
		start += len(members) - removed
	}
}

// readyPage returns count members of the ready set from index start, and
// their touch numbers ("" for none).
func (s *Store) readyPage(ctx context.Context, start, count int) (members, touches []string, err error) {
	res, err := readyPageScript.Run(ctx, s.client, s.readyKeys(), start, start+count-1).Slice()
	if err != nil {
		return nil, nil, err
	}
	if len(res) != 2 {
		return nil, nil, fmt.Errorf("page script returned %d values", len(res))
	}
	mv, _ := res[0].([]any)
	tv, _ := res[1].([]any)
	if len(mv) != len(tv) {
		return nil, nil, fmt.Errorf("page script returned %d members and %d touches", len(mv), len(tv))
	}
	for i := range mv {
		m, ok := mv[i].(string)
		if !ok {
			return nil, nil, fmt.Errorf("ready member: unexpected reply %T", mv[i])
		}
		t, _ := tv[i].(string) // nil: no touch number
		members = append(members, m)
		touches = append(touches, t)
	}
	return members, touches, nil
}

// Boot implements agent.Store.
func (s *Store) Boot(ctx context.Context, replica string) (int64, error) {
	if err := storelease.CheckReplica(replica); err != nil {
		return 0, err
	}
	n, err := s.client.Incr(ctx, s.key(boot, noKey, replica)).Result()
	if err != nil {
		return 0, fmt.Errorf("redis boot: %w", err)
	}
	return n, nil
}

// TryLease implements agent.Store.
func (s *Store) TryLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	if err := storelease.CheckNamed(name, owner); err != nil {
		return false, err
	}
	if err := storelease.CheckTTL(ttl); err != nil {
		return false, err
	}
	n, err := tryLeaseScript.Run(ctx, s.client, []string{s.key(named, noKey, name)}, owner, ms(ttl)).Int()
	if err != nil {
		return false, fmt.Errorf("redis try lease: %w", err)
	}
	return n == 1, nil
}

// DropLease implements agent.Store.
func (s *Store) DropLease(ctx context.Context, name, owner string) error {
	if err := storelease.CheckNamed(name, owner); err != nil {
		return err
	}
	if err := abandonScript.Run(ctx, s.client, []string{s.key(named, noKey, name)}, owner).Err(); err != nil {
		return fmt.Errorf("redis drop lease: %w", err)
	}
	return nil
}

// Waiting implements agent.Store. It SCANs for mailbox keys (on every
// master of a Cluster, every shard of a Ring) and then counts their entries
// in one pipeline.
func (s *Store) Waiting(ctx context.Context) ([]agent.SessionKey, error) {
	var (
		mu    sync.Mutex
		found = map[string]agent.SessionKey{} // SCAN may return a key twice
	)
	match := globEscape(s.prefix) + ":{*}:s:*:mbox"
	scan := func(ctx context.Context, c goredis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, scanCount).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			if key, ok := s.mailboxSession(k); ok {
				mu.Lock()
				found[k] = key
				mu.Unlock()
			}
		}
		return iter.Err()
	}
	var err error
	switch c := s.client.(type) {
	case *goredis.ClusterClient:
		// A Cluster node scans only its own keys. ForEachMaster calls fn
		// on all masters at once, hence the mutex.
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error { return scan(ctx, node) })
	case *goredis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, shard *goredis.Client) error { return scan(ctx, shard) })
	default:
		err = scan(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("redis waiting: %w", err)
	}
	if len(found) == 0 {
		return nil, nil
	}

	// Redis deletes a list when its last entry goes, so a key SCAN saw may
	// since have been emptied (or expired): count what is left.
	names := slices.Collect(maps.Keys(found))
	lens := make([]*goredis.IntCmd, len(names))
	_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range names {
			lens[i] = p.LLen(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis waiting: %w", err)
	}
	var keys []agent.SessionKey
	for i, k := range names {
		if lens[i].Val() > 0 {
			keys = append(keys, found[k])
		}
	}
	slices.SortFunc(keys, func(a, b agent.SessionKey) int { return strings.Compare(a.String(), b.String()) })
	return keys, nil
}

// History implements agent.Store.
func (s *Store) History(ctx context.Context, key agent.SessionKey) ([]agent.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	turns, err := s.client.LRange(ctx, s.key(history, key, ""), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redis history: %w", err)
	}
	var msgs []agent.Message
	for _, t := range turns {
		if msgs, err = appendTurn(msgs, t); err != nil {
			return nil, fmt.Errorf("redis history: %w", err)
		}
	}
	return msgs, nil
}

// Reset implements agent.Store.
func (s *Store) Reset(ctx context.Context, key agent.SessionKey) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := s.client.Del(ctx, s.key(history, key, "")).Err(); err != nil {
		return fmt.Errorf("redis reset: %w", err)
	}
	return nil
}

// Pending implements agent.Store.
func (s *Store) Pending(ctx context.Context, key agent.SessionKey) (int, error) {
	if err := key.Validate(); err != nil {
		return 0, err
	}
	n, err := s.client.LLen(ctx, s.key(mailbox, key, "")).Result()
	if err != nil {
		return 0, fmt.Errorf("redis pending: %w", err)
	}
	return int(n), nil
}

// Active implements agent.Store. The history and mailbox keys share a slot,
// so one EXISTS answers it.
func (s *Store) Active(ctx context.Context, key agent.SessionKey) (bool, error) {
	if err := key.Validate(); err != nil {
		return false, err
	}
	n, err := s.client.Exists(ctx, s.key(history, key, ""), s.key(mailbox, key, "")).Result()
	if err != nil {
		return false, fmt.Errorf("redis active: %w", err)
	}
	return n > 0, nil
}

// Settings implements agent.Store.
func (s *Store) Settings(ctx context.Context, channel agent.SessionKey) (agent.ChannelSettings, error) {
	var cs agent.ChannelSettings
	if err := channel.Validate(); err != nil {
		return cs, err
	}
	data, err := s.client.HGet(ctx, s.key(settings, channel, ""), "json").Bytes()
	if errors.Is(err, goredis.Nil) {
		return cs, nil
	}
	if err != nil {
		return cs, fmt.Errorf("redis settings: %w", err)
	}
	if cs, err = storegov.DecodeSettings(data); err != nil {
		return agent.ChannelSettings{}, fmt.Errorf("redis settings: %w", err)
	}
	return cs, nil
}

// SetSettings implements agent.Store.
func (s *Store) SetSettings(ctx context.Context, channel agent.SessionKey, cs agent.ChannelSettings) (agent.ChannelSettings, error) {
	if err := channel.Validate(); err != nil {
		return agent.ChannelSettings{}, err
	}
	want := cs.Version
	cs.Version++
	data, err := storejson.Marshal(cs)
	if err != nil {
		return agent.ChannelSettings{}, err
	}
	n, err := setSettingsScript.Run(ctx, s.client, []string{s.key(settings, channel, "")},
		strconv.FormatInt(want, 10), strconv.FormatInt(cs.Version, 10), data).Int()
	if err != nil {
		return agent.ChannelSettings{}, fmt.Errorf("redis set settings: %w", err)
	}
	if n != 1 {
		return agent.ChannelSettings{}, agent.ErrVersionConflict
	}
	return cs, nil
}

func decodeMailbox(v any) ([]agent.Inbound, error) {
	entries, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("mailbox: unexpected reply %T", v)
	}
	out := make([]agent.Inbound, 0, len(entries))
	for _, e := range entries {
		data, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("mailbox entry: unexpected reply %T", e)
		}
		var in agent.Inbound
		if err := json.Unmarshal([]byte(data), &in); err != nil {
			return nil, fmt.Errorf("mailbox entry: %w", err)
		}
		out = append(out, in)
	}
	return out, nil
}

func decodeOutbox(v any) ([]agent.Outbound, error) {
	entries, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("outbox: unexpected reply %T", v)
	}
	var out []agent.Outbound
	for _, e := range entries {
		data, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("outbox entry: unexpected reply %T", e)
		}
		var o agent.Outbound
		if err := json.Unmarshal([]byte(data), &o); err != nil {
			return nil, fmt.Errorf("outbox entry: %w", err)
		}
		out = append(out, o)
	}
	return out, nil
}

func decodeHistory(v any) ([]agent.Message, error) {
	turns, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("history: unexpected reply %T", v)
	}
	var msgs []agent.Message
	for _, t := range turns {
		data, ok := t.(string)
		if !ok {
			return nil, fmt.Errorf("history turn: unexpected reply %T", t)
		}
		var err error
		if msgs, err = appendTurn(msgs, data); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

// appendTurn decodes one history element (a JSON array of a turn's
// messages) onto msgs.
func appendTurn(msgs []agent.Message, data string) ([]agent.Message, error) {
	var turn []agent.Message
	if err := json.Unmarshal([]byte(data), &turn); err != nil {
		return nil, fmt.Errorf("history turn: %w", err)
	}
	return append(msgs, turn...), nil
}

// Ready reads the ready set in pages of its limit, within these bounds: a
// page larger than the limit lets one call step over sessions that are
// leased (their turn is running), a bounded page keeps each script short.
// readyPagesMax bounds the pages one call reads, should sessions keep
// entering the set as fast as the call drops the emptied ones; the next
// poll goes on.
const (
	readyPageMin  = 64
	readyPageMax  = 1024
	readyPagesMax = 64
)

// scanCount is the COUNT hint of Waiting's SCAN: keys a server looks at per
// call. Larger means fewer round trips and longer single calls.
const scanCount = 1000

// ms is d in whole milliseconds for PX and PEXPIRE, at least 1 (0 is an
// error there).
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
