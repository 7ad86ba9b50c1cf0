package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/bbolt"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/internal/storejson"
)

// The buckets of govern.Store's records. Keys that hold a name from
// outside use storegov.Subject or storegov.Escape, so they do not collide.
var (
	// storegov.Subject → Grant JSON. Never expires: a grant holds until
	// an admin revokes it.
	bucketGrants = []byte("grants")
	// code → storegov.Pairing JSON; expired requests are skipped on read
	// and dropped by Pair, TakePairing and the sweeper.
	bucketPairings = []byte("pairings")
	// storegov.Subject → code of the subject's request.
	bucketPairSubjects = []byte("pair-subjects")
	// name → expiry of a Once mark.
	bucketOnce = []byte("once")
	// escaped author + window length → window number and count (two
	// uint64).
	bucketMsgCounts = []byte("msg-counts")
	// escaped author + escaped message → expiry of the mark that the
	// message was counted.
	bucketMsgSeen = []byte("msg-seen")
	// approval ID → Approval JSON (decided or not); kept until
	// storegov.ApprovalKeep after its deadline.
	bucketApprovals = []byte("approvals")
	// channel key + day → count and expiry (two uint64); a channel key's
	// String() ends in ':' and a day is ten characters, so they do not
	// collide.
	bucketUsage = []byte("usage")
	// sequence → AuditEntry JSON, oldest first; at most auditCap entries.
	bucketAudit = []byte("audit")
)

var governBuckets = [][]byte{bucketGrants, bucketPairings, bucketPairSubjects, bucketOnce, bucketMsgCounts, bucketMsgSeen,
	bucketApprovals, bucketUsage, bucketAudit}

// update runs fn in a write transaction after checking ctx, and prefixes
// its error with what.
func (s *Store) update(ctx context.Context, what string, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.db.Update(fn); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// view is update's read-only twin.
func (s *Store) view(ctx context.Context, what string, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.db.View(fn); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Allowed implements govern.Store.
func (s *Store) Allowed(ctx context.Context, platform string, kind govern.GrantKind, id string) (ok bool, err error) {
	if err := storegov.CheckSubject(platform, kind, id); err != nil {
		return false, err
	}
	err = s.view(ctx, "allowed", func(tx *bbolt.Tx) error {
		ok = tx.Bucket(bucketGrants).Get([]byte(storegov.Subject(platform, kind, id))) != nil
		return nil
	})
	return ok, err
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
	return s.update(ctx, "allow", func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketGrants).Put([]byte(storegov.Subject(g.Platform, g.Kind, g.ID)), data)
	})
}

// Revoke implements govern.Store.
func (s *Store) Revoke(ctx context.Context, platform string, kind govern.GrantKind, id string) (had bool, err error) {
	if err := storegov.CheckSubject(platform, kind, id); err != nil {
		return false, err
	}
	err = s.update(ctx, "revoke", func(tx *bbolt.Tx) error {
		b, k := tx.Bucket(bucketGrants), []byte(storegov.Subject(platform, kind, id))
		if had = b.Get(k) != nil; had {
			return b.Delete(k)
		}
		return nil
	})
	return had, err
}

// Grants implements govern.Store.
func (s *Store) Grants(ctx context.Context, platform string) ([]govern.Grant, error) {
	var out []govern.Grant
	err := s.view(ctx, "grants", func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketGrants).ForEach(func(_, v []byte) error {
			var g govern.Grant
			if err := json.Unmarshal(v, &g); err != nil {
				return err
			}
			if platform == "" || g.Platform == platform {
				out = append(out, g)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	storegov.SortGrants(out)
	return out, nil
}

// Pair implements govern.Store.
func (s *Store) Pair(ctx context.Context, p govern.Pairing) (stored govern.Pairing, created bool, err error) {
	now := time.Now()
	if err := storegov.CheckPairing(p, now); err != nil {
		return govern.Pairing{}, false, err
	}
	subject := storegov.Subject(p.Platform, p.Kind, p.ID)
	data, err := storejson.Marshal(storegov.Pairing{Pairing: p, Subject: subject})
	if err != nil {
		return govern.Pairing{}, false, err
	}
	err = s.update(ctx, "pair", func(tx *bbolt.Tx) error {
		codes, subjects := tx.Bucket(bucketPairings), tx.Bucket(bucketPairSubjects)
		if code := bytes.Clone(subjects.Get([]byte(subject))); code != nil {
			cur, ok, err := readPairing(codes, code, now)
			if err != nil {
				return err
			}
			if ok {
				stored = cur
				return nil
			}
			if err := dropPairing(tx, code); err != nil {
				return err
			}
		}
		if codes.Get([]byte(p.Code)) != nil {
			_, ok, err := readPairing(codes, []byte(p.Code), now)
			if err != nil {
				return err
			}
			if ok {
				return fmt.Errorf("%w pairing: code %s is another request's", agent.ErrInvalid, p.Code)
			}
			if err := dropPairing(tx, []byte(p.Code)); err != nil {
				return err
			}
		}
		if err := codes.Put([]byte(p.Code), data); err != nil {
			return err
		}
		stored, created = p, true
		return subjects.Put([]byte(subject), []byte(p.Code))
	})
	if err != nil {
		return govern.Pairing{}, false, err
	}
	return stored, created, nil
}

// TakePairing implements govern.Store.
func (s *Store) TakePairing(ctx context.Context, code string) (p govern.Pairing, err error) {
	if code == "" {
		return govern.Pairing{}, agent.ErrNotFound
	}
	now := time.Now()
	err = s.update(ctx, "take pairing", func(tx *bbolt.Tx) error {
		cur, ok, err := readPairing(tx.Bucket(bucketPairings), []byte(code), now)
		if err != nil {
			return err
		}
		if err := dropPairing(tx, []byte(code)); err != nil {
			return err
		}
		if !ok {
			return agent.ErrNotFound
		}
		p = cur
		return nil
	})
	return p, err
}

// Pairings implements govern.Store.
func (s *Store) Pairings(ctx context.Context) ([]govern.Pairing, error) {
	now := time.Now()
	var out []govern.Pairing
	err := s.view(ctx, "pairings", func(tx *bbolt.Tx) error {
		codes := tx.Bucket(bucketPairings)
		return codes.ForEach(func(k, _ []byte) error {
			p, ok, err := readPairing(codes, k, now)
			if ok {
				out = append(out, p)
			}
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	storegov.SortPairings(out)
	return out, nil
}

// readPairing returns the request with code and whether it is there and
// has not expired at now.
func readPairing(codes *bbolt.Bucket, code []byte, now time.Time) (govern.Pairing, bool, error) {
	v := codes.Get(code)
	if v == nil {
		return govern.Pairing{}, false, nil
	}
	var p storegov.Pairing
	if err := json.Unmarshal(v, &p); err != nil {
		return govern.Pairing{}, false, fmt.Errorf("pairing %s: %w", code, err)
	}
	return p.Pairing, p.Expires.After(now), nil
}

// dropPairing deletes the request with code and its subject's index entry.
func dropPairing(tx *bbolt.Tx, code []byte) error {
	code = bytes.Clone(code) // it may point into a page the deletes change
	codes, subjects := tx.Bucket(bucketPairings), tx.Bucket(bucketPairSubjects)
	v := codes.Get(code)
	if v == nil {
		return nil
	}
	var p storegov.Pairing
	if err := json.Unmarshal(v, &p); err == nil && bytes.Equal(subjects.Get([]byte(p.Subject)), code) {
		if err := subjects.Delete([]byte(p.Subject)); err != nil {
			return err
		}
	}
	return codes.Delete(code)
}

// Once implements govern.Store.
func (s *Store) Once(ctx context.Context, name string, ttl time.Duration) (first bool, err error) {
	if err := storegov.CheckName("once", name, ttl); err != nil {
		return false, err
	}
	now := time.Now()
	err = s.update(ctx, "once", func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketOnce)
		if exp := b.Get([]byte(name)); exp != nil && now.Before(decodeTime(exp)) {
			return nil
		}
		first = true
		return b.Put([]byte(name), encodeTime(now.Add(ttl)))
	})
	return first, err
}

// CountMessage implements govern.Store in one transaction.
func (s *Store) CountMessage(ctx context.Context, who, message string, limit int64, window, dedup time.Duration) (c govern.MessageCount, err error) {
	if err := storegov.CheckCountMessage(who, message, limit, window, dedup); err != nil {
		return govern.MessageCount{}, err
	}
	now := time.Now()
	n, wms := storegov.Window(now, window)
	mark := []byte(storegov.Escape(who) + ":" + storegov.Escape(message))
	k := []byte(storegov.Escape(who) + ":" + strconv.FormatInt(wms, 10))
	err = s.update(ctx, "count message", func(tx *bbolt.Tx) error {
		counts, seen := tx.Bucket(bucketMsgCounts), tx.Bucket(bucketMsgSeen)
		count := windowCount(counts.Get(k), n)
		if exp := seen.Get(mark); exp != nil && now.Before(decodeTime(exp)) {
			c = storegov.MessageCount(count, false, limit)
			return nil
		}
		count++
		c = storegov.MessageCount(count, true, limit)
		if err := seen.Put(mark, encodeTime(now.Add(dedup))); err != nil {
			return err
		}
		return counts.Put(k, encodeWindowCount(n, count))
	})
	return c, err
}

// windowCount is the count that v (a record of bucketMsgCounts) holds for
// window n: 0 if it is another window's.
func windowCount(v []byte, n int64) int64 {
	if len(v) == 16 && int64(binary.BigEndian.Uint64(v)) == n {
		return int64(binary.BigEndian.Uint64(v[8:]))
	}
	return 0
}

// encodeWindowCount is windowCount's record of count in window n.
func encodeWindowCount(n, count int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(n)), uint64(count))
}

// AddUsage implements govern.Store.
func (s *Store) AddUsage(ctx context.Context, channel agent.SessionKey, day string, tokens int64) (total int64, err error) {
	if err := storegov.CheckUsage(channel, day, tokens); err != nil {
		return 0, err
	}
	err = s.update(ctx, "add usage", func(tx *bbolt.Tx) error {
		total, err = addUsage(tx, channel, day, tokens, time.Now())
		return err
	})
	return total, err
}

// addUsage adds tokens to channel's count for day and returns the total.
func addUsage(tx *bbolt.Tx, channel agent.SessionKey, day string, tokens int64, now time.Time) (int64, error) {
	b := tx.Bucket(bucketUsage)
	k := usageKey(channel, day)
	total := readUsage(b.Get(k), now) + tokens
	v := binary.BigEndian.AppendUint64(nil, uint64(total))
	return total, b.Put(k, append(v, encodeTime(now.Add(storegov.UsageTTL))...))
}

// Usage implements govern.Store.
func (s *Store) Usage(ctx context.Context, channel agent.SessionKey, day string) (total int64, err error) {
	if err := storegov.CheckUsage(channel, day, 0); err != nil {
		return 0, err
	}
	now := time.Now()
	err = s.view(ctx, "usage", func(tx *bbolt.Tx) error {
		total = readUsage(tx.Bucket(bucketUsage).Get(usageKey(channel, day)), now)
		return nil
	})
	return total, err
}

func usageKey(channel agent.SessionKey, day string) []byte {
	return []byte(channel.Channel().String() + day)
}

// readUsage decodes a usage record: 0 if there is none or it expired.
func readUsage(v []byte, now time.Time) int64 {
	if len(v) != 16 || !now.Before(decodeTime(v[8:])) {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
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
	now := time.Now()
	return s.update(ctx, "put approval", func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketApprovals)
		if _, ok, err := readApproval(b, a.ID, now); err != nil || ok {
			if err == nil {
				err = fmt.Errorf("%w approval: ID %s is taken", agent.ErrInvalid, a.ID)
			}
			return err
		}
		return b.Put([]byte(a.ID), data)
	})
}

// Approval implements govern.Store.
func (s *Store) Approval(ctx context.Context, id string) (a agent.Approval, err error) {
	now := time.Now()
	err = s.view(ctx, "approval", func(tx *bbolt.Tx) error {
		cur, ok, err := readApproval(tx.Bucket(bucketApprovals), id, now)
		if err != nil {
			return err
		}
		if !ok {
			return agent.ErrNotFound
		}
		a = cur
		return nil
	})
	return a, err
}

// DecideApproval implements govern.Store.
func (s *Store) DecideApproval(ctx context.Context, id string, d govern.ApprovalDecision) (a agent.Approval, decided bool, err error) {
	now := time.Now()
	dec, err := storegov.CheckDecision(id, d, now)
	if err != nil {
		return agent.Approval{}, false, err
	}
	err = s.update(ctx, "decide approval", func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketApprovals)
		cur, ok, err := readApproval(b, id, now)
		if err != nil {
			return err
		}
		if !ok {
			return agent.ErrNotFound
		}
		a = cur
		if a.State != agent.ApprovalPending {
			return nil
		}
		dec.Apply(&a)
		data, err := storejson.Marshal(a)
		if err != nil {
			return err
		}
		decided = true
		return b.Put([]byte(id), data)
	})
	if err != nil {
		return agent.Approval{}, false, err
	}
	return a, decided, nil
}

// readApproval returns the approval with id and whether it is there and
// still kept at now.
func readApproval(b *bbolt.Bucket, id string, now time.Time) (agent.Approval, bool, error) {
	if id == "" {
		return agent.Approval{}, false, nil
	}
	v := b.Get([]byte(id))
	if v == nil {
		return agent.Approval{}, false, nil
	}
	var a agent.Approval
	if err := json.Unmarshal(v, &a); err != nil {
		return agent.Approval{}, false, fmt.Errorf("approval %s: %w", id, err)
	}
	return a, storegov.ApprovalTTL(a.Deadline, now) > 0, nil
}

// Audit implements govern.Store. An entry's key is its sequence
// number, so the oldest entries are the first keys, and the entries kept
// are contiguous: the first key and the last tell how many there are.
func (s *Store) Audit(ctx context.Context, e govern.AuditEntry) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	return s.update(ctx, "audit", func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		e.ID = auditID(seq)
		data, err := storejson.Marshal(e)
		if err != nil {
			return err
		}
		if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), data); err != nil {
			return err
		}
		first, _ := b.Cursor().First()
		if len(first) != 8 {
			return nil
		}
		// Keys from first to seq are all there: entries go only from the
		// front.
		return deleteFirst(b, int(seq-binary.BigEndian.Uint64(first)+1)-s.auditCap)
	})
}

// auditID is an entry's ID: its sequence number, zero-padded so that IDs
// sort as text in the order they were written.
func auditID(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// AuditLog implements govern.Store. It reads newest first until it has
// q.Limit matching entries.
func (s *Store) AuditLog(ctx context.Context, q govern.AuditQuery) ([]govern.AuditEntry, error) {
	limit := storegov.AuditLimit(q)
	var out []govern.AuditEntry
	err := s.view(ctx, "audit log", func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		read := 0
		for k, v := c.Last(); k != nil && len(out) < limit && read < s.auditCap; k, v = c.Prev() {
			read++
			var e govern.AuditEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("entry %x: %w", k, err)
			}
			if storegov.AuditMatch(e, q) {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// sweepGovern deletes the governance records that expired before now.
func sweepGovern(tx *bbolt.Tx, now time.Time) error {
	var dead [][]byte
	collect := func(name []byte, expired func(k, v []byte) bool) {
		dead = dead[:0]
		c := tx.Bucket(name).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if expired(k, v) {
				dead = append(dead, bytes.Clone(k))
			}
		}
	}
	del := func(name []byte) error {
		b := tx.Bucket(name)
		for _, k := range dead {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	}

	codes := tx.Bucket(bucketPairings)
	collect(bucketPairings, func(k, _ []byte) bool {
		_, ok, err := readPairing(codes, k, now)
		return err == nil && !ok
	})
	for _, code := range dead {
		if err := dropPairing(tx, code); err != nil {
			return err
		}
	}
	collect(bucketOnce, func(_, v []byte) bool { return !now.Before(decodeTime(v)) })
	if err := del(bucketOnce); err != nil {
		return err
	}
	collect(bucketMsgCounts, func(k, v []byte) bool {
		// The key ends in the window's length; the value starts with its
		// number.
		i := bytes.LastIndexByte(k, ':')
		wms, err := strconv.ParseInt(string(k[i+1:]), 10, 64)
		if err != nil || len(v) != 16 {
			return true
		}
		end := (int64(binary.BigEndian.Uint64(v)) + 1) * wms
		return now.UnixMilli() >= end
	})
	if err := del(bucketMsgCounts); err != nil {
		return err
	}
	collect(bucketMsgSeen, func(_, v []byte) bool { return !now.Before(decodeTime(v)) })
	if err := del(bucketMsgSeen); err != nil {
		return err
	}
	approvals := tx.Bucket(bucketApprovals)
	collect(bucketApprovals, func(k, _ []byte) bool {
		_, ok, err := readApproval(approvals, string(k), now)
		return err == nil && !ok
	})
	if err := del(bucketApprovals); err != nil {
		return err
	}
	collect(bucketUsage, func(_, v []byte) bool { return len(v) != 16 || !now.Before(decodeTime(v[8:])) })
	return del(bucketUsage)
}
