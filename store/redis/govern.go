package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/internal/storejson"
)

// noKey is the session key of the global records, whose keys have none.
var noKey agent.SessionKey

// Allowed implements govern.Store.
func (s *Store) Allowed(ctx context.Context, platform string, kind govern.GrantKind, id string) (bool, error) {
	if err := storegov.CheckSubject(platform, kind, id); err != nil {
		return false, err
	}
	ok, err := s.client.HExists(ctx, s.key(grants, noKey, ""), storegov.Subject(platform, kind, id)).Result()
	if err != nil {
		return false, fmt.Errorf("redis allowed: %w", err)
	}
	return ok, nil
}

// Allow implements govern.Store.
func (s *Store) Allow(ctx context.Context, g govern.Grant) error {
	if err := storegov.CheckSubject(g.Platform, g.Kind, g.ID); err != nil {
		return err
	}
	data, err := storejson.Marshal(g)
	if err != nil {
		return err
	}
	if err := s.client.HSet(ctx, s.key(grants, noKey, ""), storegov.Subject(g.Platform, g.Kind, g.ID), data).Err(); err != nil {
		return fmt.Errorf("redis allow: %w", err)
	}
	return nil
}

// Revoke implements govern.Store.
func (s *Store) Revoke(ctx context.Context, platform string, kind govern.GrantKind, id string) (bool, error) {
	if err := storegov.CheckSubject(platform, kind, id); err != nil {
		return false, err
	}
	n, err := s.client.HDel(ctx, s.key(grants, noKey, ""), storegov.Subject(platform, kind, id)).Result()
	if err != nil {
		return false, fmt.Errorf("redis revoke: %w", err)
	}
	return n > 0, nil
}

// Grants implements govern.Store. Grants are few (admins add them one
// by one), so it reads them all.
func (s *Store) Grants(ctx context.Context, platform string) ([]govern.Grant, error) {
	all, err := s.client.HVals(ctx, s.key(grants, noKey, "")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis grants: %w", err)
	}
	var out []govern.Grant
	for _, v := range all {
		var g govern.Grant
		if err := json.Unmarshal([]byte(v), &g); err != nil {
			return nil, fmt.Errorf("redis grants: %w", err)
		}
		if platform == "" || g.Platform == platform {
			out = append(out, g)
		}
	}
	storegov.SortGrants(out)
	return out, nil
}

// Pair implements govern.Store.
func (s *Store) Pair(ctx context.Context, p govern.Pairing) (govern.Pairing, bool, error) {
	now := time.Now()
	if err := storegov.CheckPairing(p, now); err != nil {
		return govern.Pairing{}, false, err
	}
	subject := storegov.Subject(p.Platform, p.Kind, p.ID)
	data, err := storejson.Marshal(storegov.Pairing{Pairing: p, Subject: subject})
	if err != nil {
		return govern.Pairing{}, false, err
	}
	res, err := pairScript.Run(ctx, s.client, s.pairKeys(),
		now.UnixMilli(), subject, p.Code, data, p.Expires.UnixMilli(), ms(p.Expires.Sub(now))).Slice()
	if err != nil {
		return govern.Pairing{}, false, fmt.Errorf("redis pair: %w", err)
	}
	if len(res) != 2 {
		return govern.Pairing{}, false, fmt.Errorf("redis pair: script returned %d values", len(res))
	}
	status, _ := res[0].(int64)
	if status == 2 {
		return govern.Pairing{}, false, fmt.Errorf("%w pairing: code %s is another request's", agent.ErrInvalid, p.Code)
	}
	stored, err := decodePairing(res[1])
	if err != nil {
		return govern.Pairing{}, false, fmt.Errorf("redis pair: %w", err)
	}
	return stored, status == 1, nil
}

// TakePairing implements govern.Store.
func (s *Store) TakePairing(ctx context.Context, code string) (govern.Pairing, error) {
	if code == "" {
		return govern.Pairing{}, agent.ErrNotFound
	}
	v, err := takePairingScript.Run(ctx, s.client, s.pairKeys(), time.Now().UnixMilli(), code).Result()
	if errors.Is(err, goredis.Nil) {
		return govern.Pairing{}, agent.ErrNotFound
	}
	if err != nil {
		return govern.Pairing{}, fmt.Errorf("redis take pairing: %w", err)
	}
	p, err := decodePairing(v)
	if err != nil {
		return govern.Pairing{}, fmt.Errorf("redis take pairing: %w", err)
	}
	return p, nil
}

// Pairings implements govern.Store. It leaves expired requests for
// the next Pair or TakePairing to drop.
func (s *Store) Pairings(ctx context.Context) ([]govern.Pairing, error) {
	all, err := s.client.HVals(ctx, s.key(pairCodes, noKey, "")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis pairings: %w", err)
	}
	now := time.Now()
	var out []govern.Pairing
	for _, v := range all {
		p, err := decodePairing(v)
		if err != nil {
			return nil, fmt.Errorf("redis pairings: %w", err)
		}
		if p.Expires.After(now) {
			out = append(out, p)
		}
	}
	storegov.SortPairings(out)
	return out, nil
}

func decodePairing(v any) (govern.Pairing, error) {
	data, ok := v.(string)
	if !ok {
		return govern.Pairing{}, fmt.Errorf("pairing: unexpected reply %T", v)
	}
	var p storegov.Pairing
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		return govern.Pairing{}, fmt.Errorf("pairing: %w", err)
	}
	return p.Pairing, nil
}

// Once implements govern.Store.
func (s *Store) Once(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	if err := storegov.CheckName("once", name, ttl); err != nil {
		return false, err
	}
	first, err := s.client.SetNX(ctx, s.key(once, noKey, name), "1", time.Duration(ms(ttl))*time.Millisecond).Result()
	if err != nil {
		return false, fmt.Errorf("redis once: %w", err)
	}
	return first, nil
}

// CountMessage implements govern.Store in one script, so one round trip.
func (s *Store) CountMessage(ctx context.Context, who, message string, limit int64, window, dedup time.Duration) (govern.MessageCount, error) {
	if err := storegov.CheckCountMessage(who, message, limit, window, dedup); err != nil {
		return govern.MessageCount{}, err
	}
	n, wms := storegov.Window(time.Now(), window)
	keys := []string{s.key(msgSeen, noKey, msgSeenName(who, message)), s.key(msgCount, noKey, msgCountName(who, wms, n))}
	res, err := countMessageScript.Run(ctx, s.client, keys, ms(dedup), wms).Int64Slice()
	if err != nil {
		return govern.MessageCount{}, fmt.Errorf("redis count message: %w", err)
	}
	if len(res) != 2 {
		return govern.MessageCount{}, fmt.Errorf("redis count message: script returned %d values", len(res))
	}
	return storegov.MessageCount(res[0], res[1] == 1, limit), nil
}

// AddUsage implements govern.Store.
func (s *Store) AddUsage(ctx context.Context, channel agent.SessionKey, day string, tokens int64) (int64, error) {
	if err := storegov.CheckUsage(channel, day, tokens); err != nil {
		return 0, err
	}
	k := s.key(usage, channel, day)
	var incr *goredis.IntCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		incr = p.IncrBy(ctx, k, tokens)
		p.PExpire(ctx, k, storegov.UsageTTL)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("redis add usage: %w", err)
	}
	return incr.Val(), nil
}

// Usage implements govern.Store.
func (s *Store) Usage(ctx context.Context, channel agent.SessionKey, day string) (int64, error) {
	if err := storegov.CheckUsage(channel, day, 0); err != nil {
		return 0, err
	}
	n, err := s.client.Get(ctx, s.key(usage, channel, day)).Int64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("redis usage: %w", err)
	}
	return n, nil
}

// PutApproval implements govern.Store.
func (s *Store) PutApproval(ctx context.Context, a agent.Approval) error {
	a, err := storegov.CheckApproval(a)
	if err != nil {
		return err
	}
	data, err := storejson.Marshal(a)
	if err != nil {
		return err
	}
	n, err := putApprovalScript.Run(ctx, s.client, []string{s.key(approval, noKey, a.ID)},
		data, ms(storegov.ApprovalTTL(a.Deadline, time.Now()))).Int()
	if err != nil {
		return fmt.Errorf("redis put approval: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("%w approval: ID %s is taken", agent.ErrInvalid, a.ID)
	}
	return nil
}

// Approval implements govern.Store.
func (s *Store) Approval(ctx context.Context, id string) (agent.Approval, error) {
	if id == "" {
		return agent.Approval{}, agent.ErrNotFound
	}
	vals, err := s.client.HMGet(ctx, s.key(approval, noKey, id), "json", "decision").Result()
	if err != nil {
		return agent.Approval{}, fmt.Errorf("redis approval: %w", err)
	}
	req, _ := vals[0].(string)
	if req == "" {
		return agent.Approval{}, agent.ErrNotFound
	}
	dec, _ := vals[1].(string)
	a, err := storegov.Merge([]byte(req), []byte(dec))
	if err != nil {
		return agent.Approval{}, fmt.Errorf("redis %w", err)
	}
	return a, nil
}

// DecideApproval implements govern.Store.
func (s *Store) DecideApproval(ctx context.Context, id string, d govern.ApprovalDecision) (agent.Approval, bool, error) {
	dec, err := storegov.CheckDecision(id, d, time.Now())
	if err != nil {
		return agent.Approval{}, false, err
	}
	if id == "" {
		return agent.Approval{}, false, agent.ErrNotFound
	}
	data, err := storejson.Marshal(dec)
	if err != nil {
		return agent.Approval{}, false, err
	}
	res, err := decideApprovalScript.Run(ctx, s.client, []string{s.key(approval, noKey, id)}, string(dec.State), data).Slice()
	if errors.Is(err, goredis.Nil) {
		return agent.Approval{}, false, agent.ErrNotFound
	}
	if err != nil {
		return agent.Approval{}, false, fmt.Errorf("redis decide approval: %w", err)
	}
	if len(res) != 3 {
		return agent.Approval{}, false, fmt.Errorf("redis decide approval: script returned %d values", len(res))
	}
	decided, _ := res[0].(int64)
	req, _ := res[1].(string)
	final, _ := res[2].(string)
	a, err := storegov.Merge([]byte(req), []byte(final))
	if err != nil {
		return agent.Approval{}, false, fmt.Errorf("redis decide %w", err)
	}
	return a, decided == 1, nil
}

// Audit implements govern.Store. The stream is trimmed approximately
// (MAXLEN ~), which Redis does in whole nodes of the stream; AuditLog reads
// no further back than the cap, so what readers see is capped exactly.
func (s *Store) Audit(ctx context.Context, e govern.AuditEntry) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	e.ID = "" // the stream's ID is the entry's
	data, err := storejson.Marshal(e)
	if err != nil {
		return err
	}
	err = s.client.XAdd(ctx, &goredis.XAddArgs{
		Stream: s.key(audit, noKey, ""),
		MaxLen: int64(s.auditCap),
		Approx: true,
		Values: []any{"e", data},
	}).Err()
	if err != nil {
		return fmt.Errorf("redis audit: %w", err)
	}
	return nil
}

// auditPage is how many entries AuditLog reads per XREVRANGE at most.
const auditPage = 1000

// AuditLog implements govern.Store. It reads the stream newest first,
// a page at a time, until it has q.Limit matching entries, reaches the
// cap, or reaches the entries appended before q.Since (less
// storegov.AuditSkew, for an entry whose Time ran ahead of Redis's clock).
func (s *Store) AuditLog(ctx context.Context, q govern.AuditQuery) ([]govern.AuditEntry, error) {
	limit := storegov.AuditLimit(q)
	oldest := "-"
	if !q.Since.IsZero() {
		oldest = strconv.FormatInt(max(q.Since.Add(-storegov.AuditSkew).UnixMilli(), 0), 10)
	}
	page := int64(min(max(2*limit, 100), auditPage))
	newest := "+"
	var out []govern.AuditEntry
	read := 0
	for len(out) < limit && read < s.auditCap {
		msgs, err := s.client.XRevRangeN(ctx, s.key(audit, noKey, ""), newest, oldest, min(page, int64(s.auditCap-read))).Result()
		if err != nil {
			return nil, fmt.Errorf("redis audit log: %w", err)
		}
		for _, m := range msgs {
			read++
			data, _ := m.Values["e"].(string)
			var e govern.AuditEntry
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				return nil, fmt.Errorf("redis audit log: entry %s: %w", m.ID, err)
			}
			e.ID = m.ID
			if storegov.AuditMatch(e, q) {
				out = append(out, e)
				if len(out) == limit {
					break
				}
			}
		}
		if int64(len(msgs)) < page {
			break
		}
		newest = "(" + msgs[len(msgs)-1].ID
	}
	slices.Reverse(out)
	return out, nil
}
