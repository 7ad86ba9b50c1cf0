// Package redis is firstmate's production store: agent.Store on Redis through
// a go-redis v9 UniversalClient (single node, Sentinel or Cluster), safe for
// many replicas sharing one Redis.
//
// Each Store method is one round trip (AuditLog one per page of the log it
// reads). Steps that touch several keys are Lua scripts, so they are atomic, and all the keys a script touches share one
// Cluster slot (see Store.key). A dispatcher turn (Enqueue, Claim, Commit,
// Release) therefore costs four round trips however long the session is.
//
// Every key expires except a channel's settings and the grants, which hold
// until an admin changes them, and the audit log, which is capped by length
// instead (see the record kinds in keys.go). Durability of an acknowledged Enqueue is Redis's: run it with
// appendonly (AOF) when losing the last second of messages on a crash
// matters.
package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/internal/storejson"
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
}

var _ agent.Store = (*Store)(nil)

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
	return &Store{client: client, prefix: opts.Prefix, ret: opts.Retention.WithDefaults(), auditCap: opts.AuditCap}
}

// Open connects to the Redis at url (redis:// or rediss:// for TLS, as in
// REDIS_URL), checks that it answers and returns a Store on it.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if err := checkPrefix(opts.Prefix); err != nil {
		return nil, err
	}
	o, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	c := goredis.NewClient(o)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("REDIS_URL: no answer from Redis at %s: %w", o.Addr, err)
	}
	return New(c, opts), nil
}

// parseURL parses a REDIS_URL. Its errors never quote the URL, which may
// hold a password.
func parseURL(raw string) (*goredis.Options, error) {
	o, err := goredis.ParseURL(raw)
	if err != nil {
		// url.Parse quotes the whole URL in its errors.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("REDIS_URL: want redis://[user:password@]host[:port][/db] or rediss:// for TLS: %w", err)
	}
	return o, nil
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
	keys := []string{s.key(dedup, in.Key, in.MessageID), s.key(mailbox, in.Key, ""), s.key(history, in.Key, "")}
	n, err := enqueueScript.Run(ctx, s.client, keys, ms(s.ret.DedupTTL), data, ms(s.ret.HistoryTTL)).Int()
	if err != nil {
		return false, fmt.Errorf("redis enqueue: %w", err)
	}
	return n == 1, nil
}

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
	res, err := claimScript.Run(ctx, s.client, s.sessionKeys(key), owner, ms(ttl)).Slice()
	if errors.Is(err, goredis.Nil) {
		return nil, agent.ErrLeaseHeld
	}
	if err != nil {
		return nil, fmt.Errorf("redis claim: %w", err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("redis claim: script returned %d values", len(res))
	}
	c := &agent.Claim{}
	if c.Mailbox, err = decodeMailbox(res[0]); err != nil {
		return nil, fmt.Errorf("redis claim: %w", err)
	}
	if c.History, err = decodeHistory(res[1]); err != nil {
		return nil, fmt.Errorf("redis claim: %w", err)
	}
	return c, nil
}

// Renew implements agent.Store.
func (s *Store) Renew(ctx context.Context, key agent.SessionKey, owner string, ttl time.Duration) error {
	if err := agent.ValidateLease(key, owner, ttl); err != nil {
		return err
	}
	n, err := renewScript.Run(ctx, s.client, []string{s.key(lease, key, "")}, owner, ms(ttl)).Int()
	if err != nil {
		return fmt.Errorf("redis renew: %w", err)
	}
	if n != 1 {
		return agent.ErrLeaseLost
	}
	return nil
}

// Commit implements agent.Store.
func (s *Store) Commit(ctx context.Context, key agent.SessionKey, owner string, consumed int, turn []agent.Message) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if consumed < 0 {
		return fmt.Errorf("%w commit: consumed %d < 0", agent.ErrInvalid, consumed)
	}
	var data []byte
	if len(turn) > 0 {
		var err error
		if data, err = storejson.Marshal(turn); err != nil {
			return err
		}
	}
	n, err := commitScript.Run(ctx, s.client, s.sessionKeys(key),
		owner, consumed, data, -s.ret.MaxTurns, ms(s.ret.HistoryTTL)).Int()
	if err != nil {
		return fmt.Errorf("redis commit: %w", err)
	}
	if n != 1 {
		return agent.ErrLeaseLost
	}
	return nil
}

// Release implements agent.Store.
func (s *Store) Release(ctx context.Context, key agent.SessionKey, owner string) (pending int, err error) {
	if err := key.Validate(); err != nil {
		return 0, err
	}
	n, err := releaseScript.Run(ctx, s.client, s.sessionKeys(key), owner).Int()
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
	if err := abandonScript.Run(ctx, s.client, []string{s.key(lease, key, "")}, owner).Err(); err != nil {
		return fmt.Errorf("redis abandon: %w", err)
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

// scanCount is the COUNT hint of Waiting's SCAN: keys a server looks at per
// call. Larger means fewer round trips and longer single calls.
const scanCount = 1000

// ms is d in whole milliseconds for PX and PEXPIRE, at least 1 (0 is an
// error there).
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
