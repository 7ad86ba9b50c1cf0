// Package local is firstmate's embedded store: one bbolt file in the data
// dir, used when no REDIS_URL is set. It serves one process and behaves like
// store/redis; both pass store/storetest.
//
// Every method touches the file in one bbolt transaction, so each step is
// atomic as a Redis script is (Ready reads in one and, when it drops sessions
// from the ready index, writes in a second, where it checks them again).
// TTLs are expiry timestamps checked on every read, which makes them exact; a
// sweeper goroutine deletes expired records now and then only so that the
// file does not grow without bound. The audit log is capped by
// length (WithAuditCap): each append deletes what falls past the cap.
//
// Leases live in memory, named ones too, and so does the count of mailbox
// entries a lease holder claimed. Only one process can open the file (bbolt
// holds an exclusive lock on it), so memory is as shared as a lease needs to
// be, and a restarted process does not wait for the lease of the process it
// replaces. Boot counters are in the file: they must never restart.
//
// The ready index (bucketReady, bucketReadyAt) lists the sessions that got
// work (Enqueue, Commit with an outbox entry) in the order they got it,
// until a Ready finds them without any, so Ready reads it and never the
// sessions bucket, however many idle sessions the file holds.
package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/agent/schedules"
	"github.com/firstmate/firstmate/store/internal/storegov"
	"github.com/firstmate/firstmate/store/internal/storejson"
	"github.com/firstmate/firstmate/store/internal/storelease"
	"github.com/firstmate/firstmate/tools"
)

// ErrInUse means another process has the store's file open.
var ErrInUse = errors.New("data dir in use by another firstmate")

// The file's layout. Keys are SessionKey.String() forms, which are
// unambiguous.
var (
	// chat key + message ID → dedup expiry. A channel key's String() ends
	// at its third unescaped ':', so the concatenation cannot collide.
	bucketSeen = []byte("seen")
	// session key → bucket holding keyExpires, bucketMailbox, bucketHistory,
	// bucketOutbox.
	bucketSessions = []byte("sessions")
	// The ready index: sequence (the order sessions got work) → session
	// key, and session key → its sequence in bucketReady. Enqueue and
	// Commit with an outbox entry add a session that is not in it; Ready
	// and the sweeper remove the sessions with no work (or none left).
	bucketReady   = []byte("ready")
	bucketReadyAt = []byte("readyat")
	// replica name → its last boot number (uint64). Never expires: an
	// owner string made from a boot number must never be handed out twice.
	bucketBoots = []byte("boots")
	// channel key → ChannelSettings as JSON. Never expires: an admin's
	// policy holds until an admin changes it.
	bucketSettings = []byte("settings")

	keyExpires    = []byte("exp")  // the session's idle deadline
	bucketMailbox = []byte("mbox") // sequence → Inbound JSON
	bucketHistory = []byte("hist") // sequence → JSON array of one turn's messages
	// sequence → Outbound JSON. Files written before the outbox existed
	// have sessions without this bucket; readers treat it as empty.
	bucketOutbox = []byte("out")
)

// lockWait is how long Open waits for another process to let go of the file.
// Long enough to ride out a restart, short enough to fail visibly.
const lockWait = time.Second

// Store is an agent.Store in a bbolt file. Open it with Open and Close it when
// done.
type Store struct {
	db       *bbolt.DB
	ret      agent.Retention
	auditCap int
	leases   leases

	stop      chan struct{} // closed by Close to stop the sweeper
	done      chan struct{} // closed by the sweeper when it returns
	closeOnce sync.Once
	closeErr  error
}

// The roles the store plays: the dispatcher's sessions, the gate's
// governance, schedules, the background jobs' board.
var (
	_ agent.Sessions  = (*Store)(nil)
	_ govern.Store    = (*Store)(nil)
	_ schedules.Store = (*Store)(nil)
	_ tools.JobBoard  = (*Store)(nil)
)

// Option configures a Store at Open.
type Option func(*Store)

// WithAuditCap sets how many audit entries the store keeps (the newest);
// storegov.DefaultAuditCap (100000) if n <= 0.
func WithAuditCap(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.auditCap = n
		}
	}
}

// Open opens or creates the store at path, creating its directory. If another
// process has the file open, Open fails with ErrInUse within about a second
// instead of hanging.
func Open(path string, ret agent.Retention, opts ...Option) (*Store, error) {
	return open(path, ret, lockWait, opts...)
}

func open(path string, ret agent.Retention, wait time.Duration, opts ...Option) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("local store: %w", err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: wait})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("local store %s: %w (its lock is held)", path, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("local store %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		// A file from before the ready index gets one: its sessions with
		// waiting messages, in the order the file lists them.
		index := tx.Bucket(bucketReady) == nil
		for _, name := range append([][]byte{bucketSeen, bucketSessions, bucketSettings, bucketReady, bucketReadyAt, bucketBoots, bucketJobs,
			bucketSchedules, bucketScheduleDue, bucketScheduleChannels}, governBuckets...) {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		// The counters of Hit, which message counts replaced: nothing
		// reads or sweeps them any more.
		if err := tx.DeleteBucket([]byte("hits")); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		if index {
			return indexWaiting(tx)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("local store %s: %w", path, err)
	}
	s := &Store{
		db:       db,
		ret:      ret.WithDefaults(),
		auditCap: storegov.DefaultAuditCap,
		leases:   leases{m: map[string]lease{}, named: map[string]lease{}},
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	go s.sweepLoop(sweepInterval(s.ret))
	return s, nil
}

// Close stops the sweeper, waits for it and closes the file.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// Enqueue implements agent.Store.
func (s *Store) Enqueue(ctx context.Context, in agent.Inbound) (added bool, err error) {
	if err := in.Validate(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	data, err := storejson.Marshal(in)
	if err != nil {
		return false, err
	}
	// The lease lock is held so that the claimed count stays what it was
	// read as until the message is in.
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	now := time.Now()
	floor := s.leases.claimed(in.Key, now)
	err = s.db.Update(func(tx *bbolt.Tx) error {
		first, err := s.markSeen(tx, in, now)
		if err != nil || !first {
			return err
		}
		sb, err := s.touchSession(tx, in.Key, now)
		if err != nil {
			return err
		}
		if err := insertSorted(sb.Bucket(bucketMailbox), data, in.Seq, floor); err != nil {
			return err
		}
		added = true
		return markReady(tx, in.Key)
	})
	if err != nil {
		return false, fmt.Errorf("enqueue: %w", err)
	}
	return added, nil
}

// Seen implements agent.Store. It shares Enqueue's dedup records, so a
// message is first either as a command or as a mailbox entry, never both.
func (s *Store) Seen(ctx context.Context, in agent.Inbound) (first bool, err error) {
	if err := in.Validate(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := time.Now()
	err = s.db.Update(func(tx *bbolt.Tx) error {
		first, err = s.markSeen(tx, in, now)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("seen: %w", err)
	}
	return first, nil
}

// markSeen records in's ID for the dedup window and reports whether it was
// new.
func (s *Store) markSeen(tx *bbolt.Tx, in agent.Inbound, now time.Time) (bool, error) {
	seen := tx.Bucket(bucketSeen)
	id := seenKey(in.Key, in.MessageID)
	if exp := seen.Get(id); exp != nil && now.Before(decodeTime(exp)) {
		return false, nil
	}
	return true, seen.Put(id, encodeTime(now.Add(s.ret.DedupTTL)))
}

// Claim implements agent.Store.
func (s *Store) Claim(ctx context.Context, key agent.SessionKey, owner string, ttl time.Duration) (*agent.Claim, error) {
	if err := agent.ValidateLease(key, owner, ttl); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	now := time.Now()
	if l, ok := s.leases.m[key.String()]; ok && l.owner != owner && now.Before(l.expires) && !storelease.Earlier(l.owner, owner) {
		return nil, agent.ErrLeaseHeld
	}
	c := &agent.Claim{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		cs, err := getSettings(tx, key.Channel())
		if err != nil {
			return err
		}
		c.Settings = &cs
		sb := readSession(tx, key, now)
		if sb == nil {
			return nil
		}
		if c.Mailbox, err = readMailbox(sb); err != nil {
			return err
		}
		if c.History, err = readHistory(sb); err != nil {
			return err
		}
		c.Outbox, err = readOutbox(sb)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	s.leases.m[key.String()] = lease{owner: owner, expires: now.Add(ttl), claimed: len(c.Mailbox)}
	return c, nil
}

// Renew implements agent.Store.
func (s *Store) Renew(ctx context.Context, key agent.SessionKey, owner string, ttl time.Duration) error {
	if err := agent.ValidateLease(key, owner, ttl); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	now := time.Now()
	if !s.leases.holds(key, owner, now) {
		return agent.ErrLeaseLost
	}
	l := s.leases.m[key.String()]
	l.expires = now.Add(ttl)
	s.leases.m[key.String()] = l
	return nil
}

// Commit implements agent.Store.
// keyCommitted holds, in a session's bucket, the ID of its last committed
// turn.
var keyCommitted = []byte("committed")

func (s *Store) Commit(ctx context.Context, key agent.SessionKey, owner string, consumed int, turn []agent.Message, out *agent.Outbound) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storelease.CheckCommit(key, consumed, out); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
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
	// The lease lock is held across the write so that the lease cannot pass
	// to another owner between the check and the write.
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	now := time.Now()
	if !s.leases.holds(key, owner, now) {
		return agent.ErrLeaseLost
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		sb, err := s.touchSession(tx, key, now)
		if err != nil {
			return err
		}
		if out != nil {
			// A commit sent again (as Redis's may be, when its reply was
			// lost) changes nothing the second time.
			if string(sb.Get(keyCommitted)) == out.ID {
				return nil
			}
			if err := sb.Put(keyCommitted, []byte(out.ID)); err != nil {
				return err
			}
			if out.Spent.Tokens > 0 {
				if _, err := addUsage(tx, key, out.Spent.Day, out.Spent.Tokens, now); err != nil {
					return err
				}
			}
		}
		if err := deleteFirst(sb.Bucket(bucketMailbox), consumed); err != nil {
			return err
		}
		if outData != nil {
			ob, err := sb.CreateBucketIfNotExists(bucketOutbox)
			if err != nil {
				return err
			}
			if err := appendSeq(ob, outData); err != nil {
				return err
			}
			if err := markReady(tx, key); err != nil {
				return err
			}
		}
		if data == nil {
			return nil
		}
		hist := sb.Bucket(bucketHistory)
		if err := appendSeq(hist, data); err != nil {
			return err
		}
		return deleteFirst(hist, count(hist)-s.ret.MaxTurns)
	})
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	l := s.leases.m[key.String()]
	l.claimed = max(l.claimed-consumed, 0)
	s.leases.m[key.String()] = l
	return nil
}

// Release implements agent.Store.
func (s *Store) Release(ctx context.Context, key agent.SessionKey, owner, shown string) (pending int, err error) {
	if err := key.Validate(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if shown != "" {
		if err := s.Delivered(ctx, key, shown); err != nil {
			return 0, err
		}
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	now := time.Now()
	if !s.leases.holds(key, owner, now) {
		return 0, agent.ErrLeaseLost
	}
	if pending, err = s.pending(now, key); err != nil {
		return 0, err
	}
	if pending > 0 {
		// The holder claims again, and sees the mailbox as it is then.
		l := s.leases.m[key.String()]
		l.claimed = 0
		s.leases.m[key.String()] = l
		return pending, nil
	}
	delete(s.leases.m, key.String())
	return 0, nil
}

// Abandon implements agent.Store.
func (s *Store) Abandon(ctx context.Context, key agent.SessionKey, owner string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if l, ok := s.leases.m[key.String()]; ok && l.owner == owner {
		delete(s.leases.m, key.String())
	}
	return nil
}

// Delivered implements agent.Store.
func (s *Store) Delivered(ctx context.Context, key agent.SessionKey, id string) error {
	if err := storelease.CheckDelivered(key, id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		sb := readSession(tx, key, time.Now())
		if sb == nil || sb.Bucket(bucketOutbox) == nil {
			return nil
		}
		ob := sb.Bucket(bucketOutbox)
		c := ob.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var o struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(v, &o) == nil && o.ID == id {
				return ob.Delete(bytes.Clone(k))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delivered: %w", err)
	}
	return nil
}

// Ready implements agent.Store. It walks the ready index, oldest first,
// and stops when it has limit sessions; the sessions it finds with no work
// (or expired) leave the index.
func (s *Store) Ready(ctx context.Context, limit int) ([]agent.SessionKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	now := time.Now()
	var (
		found []agent.SessionKey
		idle  [][]byte
	)
	// A read transaction first: most polls find nothing to remove, and a
	// write transaction costs an fsync.
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketReady).Cursor()
		for k, name := c.First(); k != nil && len(found) < limit; k, name = c.Next() {
			key, err := agent.ParseSessionKey(string(name))
			switch {
			case err != nil || !hasWork(readSession(tx, key, now)):
				idle = append(idle, bytes.Clone(name))
			case !s.leases.live(key, now):
				found = append(found, key)
			}
		}
		return nil
	})
	if err == nil && len(idle) > 0 {
		err = s.db.Update(func(tx *bbolt.Tx) error {
			for _, name := range idle {
				// Nothing wrote in between (Enqueue and Commit hold the
				// lease lock too), but a session's work is checked where
				// it is removed, as in store/redis.
				key, err := agent.ParseSessionKey(string(name))
				if err == nil && hasWork(readSession(tx, key, now)) {
					continue
				}
				if err := unmarkReady(tx, name); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("ready: %w", err)
	}
	return found, nil
}

// Boot implements agent.Store.
func (s *Store) Boot(ctx context.Context, replica string) (int64, error) {
	if err := storelease.CheckReplica(replica); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var n uint64
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketBoots)
		if v := b.Get([]byte(replica)); len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		n++
		return b.Put([]byte(replica), binary.BigEndian.AppendUint64(nil, n))
	})
	if err != nil {
		return 0, fmt.Errorf("boot: %w", err)
	}
	return int64(n), nil
}

// TryLease implements agent.Store.
func (s *Store) TryLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	if err := storelease.CheckNamed(name, owner); err != nil {
		return false, err
	}
	if err := storelease.CheckTTL(ttl); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	now := time.Now()
	if l, ok := s.leases.named[name]; ok && l.owner != owner && now.Before(l.expires) {
		return false, nil
	}
	s.leases.named[name] = lease{owner: owner, expires: now.Add(ttl)}
	return true, nil
}

// DropLease implements agent.Store.
func (s *Store) DropLease(ctx context.Context, name, owner string) error {
	if err := storelease.CheckNamed(name, owner); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if l, ok := s.leases.named[name]; ok && l.owner == owner {
		delete(s.leases.named, name)
	}
	return nil
}

// Waiting implements agent.Store.
func (s *Store) Waiting(ctx context.Context) ([]agent.SessionKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var keys []agent.SessionKey
	now := time.Now()
	err := s.db.View(func(tx *bbolt.Tx) error {
		sessions := tx.Bucket(bucketSessions)
		// Bucket names are the keys' String() forms and bbolt iterates in
		// byte order, so the list comes out sorted as agent.Store wants.
		return sessions.ForEach(func(name, _ []byte) error {
			sb := sessions.Bucket(name)
			if sb == nil || !now.Before(decodeTime(sb.Get(keyExpires))) || count(sb.Bucket(bucketMailbox)) == 0 {
				return nil
			}
			key, err := agent.ParseSessionKey(string(name))
			if err != nil {
				// Not written by this version; nothing can claim it anyway.
				return nil
			}
			keys = append(keys, key)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("waiting: %w", err)
	}
	return keys, nil
}

// History implements agent.Store.
func (s *Store) History(ctx context.Context, key agent.SessionKey) ([]agent.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var msgs []agent.Message
	err := s.db.View(func(tx *bbolt.Tx) error {
		sb := readSession(tx, key, time.Now())
		if sb == nil {
			return nil
		}
		var err error
		msgs, err = readHistory(sb)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return msgs, nil
}

// Reset implements agent.Store.
func (s *Store) Reset(ctx context.Context, key agent.SessionKey) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		sb := readSession(tx, key, time.Now())
		if sb == nil {
			return nil
		}
		if err := sb.DeleteBucket(bucketHistory); err != nil {
			return err
		}
		_, err := sb.CreateBucket(bucketHistory)
		return err
	})
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	return nil
}

// Pending implements agent.Store.
func (s *Store) Pending(ctx context.Context, key agent.SessionKey) (int, error) {
	if err := key.Validate(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.pending(time.Now(), key)
}

func (s *Store) pending(now time.Time, key agent.SessionKey) (n int, err error) {
	err = s.db.View(func(tx *bbolt.Tx) error {
		if sb := readSession(tx, key, now); sb != nil {
			n = count(sb.Bucket(bucketMailbox))
		}
		return nil
	})
	return n, err
}

// Active implements agent.Store.
func (s *Store) Active(ctx context.Context, key agent.SessionKey) (bool, error) {
	if err := key.Validate(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	var active bool
	err := s.db.View(func(tx *bbolt.Tx) error {
		if sb := readSession(tx, key, time.Now()); sb != nil {
			active = nonEmpty(sb.Bucket(bucketMailbox)) || nonEmpty(sb.Bucket(bucketHistory))
		}
		return nil
	})
	return active, err
}

// Settings implements agent.Store.
func (s *Store) Settings(ctx context.Context, channel agent.SessionKey) (agent.ChannelSettings, error) {
	if err := channel.Validate(); err != nil {
		return agent.ChannelSettings{}, err
	}
	if err := ctx.Err(); err != nil {
		return agent.ChannelSettings{}, err
	}
	var cs agent.ChannelSettings
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		cs, err = getSettings(tx, channel)
		return err
	})
	if err != nil {
		return agent.ChannelSettings{}, fmt.Errorf("settings: %w", err)
	}
	return cs, nil
}

// SetSettings implements agent.Store.
func (s *Store) SetSettings(ctx context.Context, channel agent.SessionKey, cs agent.ChannelSettings) (agent.ChannelSettings, error) {
	if err := channel.Validate(); err != nil {
		return agent.ChannelSettings{}, err
	}
	if err := ctx.Err(); err != nil {
		return agent.ChannelSettings{}, err
	}
	want := cs.Version
	cs.Version++
	data, err := storejson.Marshal(cs)
	if err != nil {
		return agent.ChannelSettings{}, err
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		cur, err := getSettings(tx, channel)
		if err != nil {
			return err
		}
		if cur.Version != want {
			return agent.ErrVersionConflict
		}
		return tx.Bucket(bucketSettings).Put([]byte(channel.Channel().String()), data)
	})
	if err != nil {
		return agent.ChannelSettings{}, fmt.Errorf("set settings: %w", err)
	}
	return cs, nil
}

func getSettings(tx *bbolt.Tx, channel agent.SessionKey) (agent.ChannelSettings, error) {
	data := tx.Bucket(bucketSettings).Get([]byte(channel.Channel().String()))
	if data == nil {
		return agent.ChannelSettings{}, nil
	}
	return storegov.DecodeSettings(data)
}

// readSession returns key's session bucket, or nil if there is none or it
// has expired.
func readSession(tx *bbolt.Tx, key agent.SessionKey, now time.Time) *bbolt.Bucket {
	sb := tx.Bucket(bucketSessions).Bucket([]byte(key.String()))
	if sb == nil || !now.Before(decodeTime(sb.Get(keyExpires))) {
		return nil
	}
	return sb
}

// touchSession returns key's session bucket for writing and moves its idle
// deadline to now+HistoryTTL. An expired session is emptied first, as Redis
// would have dropped its keys.
func (s *Store) touchSession(tx *bbolt.Tx, key agent.SessionKey, now time.Time) (*bbolt.Bucket, error) {
	sessions := tx.Bucket(bucketSessions)
	name := []byte(key.String())
	sb := readSession(tx, key, now)
	if sb == nil {
		if sessions.Bucket(name) != nil {
			if err := sessions.DeleteBucket(name); err != nil {
				return nil, err
			}
		}
		var err error
		if sb, err = sessions.CreateBucket(name); err != nil {
			return nil, err
		}
		for _, sub := range [][]byte{bucketMailbox, bucketHistory, bucketOutbox} {
			if _, err := sb.CreateBucket(sub); err != nil {
				return nil, err
			}
		}
	}
	return sb, sb.Put(keyExpires, encodeTime(now.Add(s.ret.HistoryTTL)))
}

func readMailbox(sb *bbolt.Bucket) ([]agent.Inbound, error) {
	var out []agent.Inbound
	err := sb.Bucket(bucketMailbox).ForEach(func(_, v []byte) error {
		var in agent.Inbound
		if err := json.Unmarshal(v, &in); err != nil {
			return fmt.Errorf("mailbox entry: %w", err)
		}
		out = append(out, in)
		return nil
	})
	return out, err
}

func readOutbox(sb *bbolt.Bucket) ([]agent.Outbound, error) {
	ob := sb.Bucket(bucketOutbox)
	if ob == nil {
		return nil, nil
	}
	var out []agent.Outbound
	err := ob.ForEach(func(_, v []byte) error {
		var o agent.Outbound
		if err := json.Unmarshal(v, &o); err != nil {
			return fmt.Errorf("outbox entry: %w", err)
		}
		out = append(out, o)
		return nil
	})
	return out, err
}

// hasWork reports whether a session (nil: none, or expired) has mailbox or
// outbox entries.
func hasWork(sb *bbolt.Bucket) bool {
	if sb == nil {
		return false
	}
	if nonEmpty(sb.Bucket(bucketMailbox)) {
		return true
	}
	ob := sb.Bucket(bucketOutbox)
	return ob != nil && nonEmpty(ob)
}

// markReady puts key in the ready index unless it is there.
func markReady(tx *bbolt.Tx, key agent.SessionKey) error {
	name := []byte(key.String())
	at := tx.Bucket(bucketReadyAt)
	if at.Get(name) != nil {
		return nil
	}
	ready := tx.Bucket(bucketReady)
	n, err := ready.NextSequence()
	if err != nil {
		return err
	}
	k := binary.BigEndian.AppendUint64(nil, n)
	if err := ready.Put(k, name); err != nil {
		return err
	}
	return at.Put(name, k)
}

// unmarkReady takes the session named name out of the ready index.
func unmarkReady(tx *bbolt.Tx, name []byte) error {
	at := tx.Bucket(bucketReadyAt)
	k := at.Get(name)
	if k == nil {
		return nil
	}
	if err := tx.Bucket(bucketReady).Delete(bytes.Clone(k)); err != nil {
		return err
	}
	return at.Delete(name)
}

// indexWaiting puts every session with waiting messages in the ready index.
func indexWaiting(tx *bbolt.Tx) error {
	sessions := tx.Bucket(bucketSessions)
	var waiting []agent.SessionKey
	err := sessions.ForEach(func(name, _ []byte) error {
		sb := sessions.Bucket(name)
		if sb == nil || sb.Bucket(bucketMailbox) == nil || !nonEmpty(sb.Bucket(bucketMailbox)) {
			return nil
		}
		if key, err := agent.ParseSessionKey(string(name)); err == nil {
			waiting = append(waiting, key)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, key := range waiting {
		if err := markReady(tx, key); err != nil {
			return err
		}
	}
	return nil
}

// insertSorted adds entry, an Inbound whose Seq is seq, to the mailbox mb
// in the platform's order (storelease.GoesAfter), never before mb's first
// floor entries, which a running turn claimed. The entries it goes before
// are moved behind it under new sequence numbers; comparing with the last
// entry first keeps the usual case, a message newer than the rest, a plain
// append.
func insertSorted(mb *bbolt.Bucket, entry []byte, seq string, floor int) error {
	c := mb.Cursor()
	k, v := c.Last()
	if k == nil || !storelease.GoesAfter(seqOf(v), seq) {
		return appendSeq(mb, entry)
	}
	movable := count(mb) - floor
	var keys, moved [][]byte // the entries that go after entry, last first
	for ; k != nil && len(moved) < movable && storelease.GoesAfter(seqOf(v), seq); k, v = c.Prev() {
		keys = append(keys, bytes.Clone(k))
		moved = append(moved, bytes.Clone(v))
	}
	for _, k := range keys {
		if err := mb.Delete(k); err != nil {
			return err
		}
	}
	if err := appendSeq(mb, entry); err != nil {
		return err
	}
	for i := len(moved) - 1; i >= 0; i-- {
		if err := appendSeq(mb, moved[i]); err != nil {
			return err
		}
	}
	return nil
}

// seqOf returns the Seq of a mailbox entry; "" if it has none or does not
// decode.
func seqOf(entry []byte) string {
	var in struct {
		Seq string `json:"seq"`
	}
	_ = json.Unmarshal(entry, &in)
	return in.Seq
}

func readHistory(sb *bbolt.Bucket) ([]agent.Message, error) {
	var out []agent.Message
	err := sb.Bucket(bucketHistory).ForEach(func(_, v []byte) error {
		var turn []agent.Message
		if err := json.Unmarshal(v, &turn); err != nil {
			return fmt.Errorf("history turn: %w", err)
		}
		out = append(out, turn...)
		return nil
	})
	return out, err
}

// appendSeq appends v to b under the bucket's next sequence number, so that
// key order is arrival order.
func appendSeq(b *bbolt.Bucket, v []byte) error {
	n, err := b.NextSequence()
	if err != nil {
		return err
	}
	return b.Put(binary.BigEndian.AppendUint64(nil, n), v)
}

// deleteFirst deletes b's first n entries (all of them if it has fewer).
func deleteFirst(b *bbolt.Bucket, n int) error {
	if n <= 0 {
		return nil
	}
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && len(keys) < n; k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func nonEmpty(b *bbolt.Bucket) bool {
	k, _ := b.Cursor().First()
	return k != nil
}

func count(b *bbolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

// seenKey is the dedup record's key. Dedup is per chat, not per session: a
// message ID is unique in its chat whatever thread an adapter files it under.
func seenKey(key agent.SessionKey, messageID string) []byte {
	return []byte(key.Channel().String() + messageID)
}

func encodeTime(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano()))
}

// decodeTime reads an encodeTime value; anything else reads as the epoch,
// which is expired.
func decodeTime(b []byte) time.Time {
	if len(b) != 8 {
		return time.Unix(0, 0)
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)))
}

type lease struct {
	owner   string
	expires time.Time
	// claimed is how many mailbox entries the holder's last Claim handed
	// out and no Commit has consumed yet: Enqueue inserts after them.
	claimed int
}

// leases are the sessions' leases by session key, and the named leases by
// name. mu also serializes the writes that must happen under a lease
// (Commit, Release) or that depend on one (Enqueue).
type leases struct {
	mu    sync.Mutex
	m     map[string]lease
	named map[string]lease
}

// holds reports whether owner holds key's lease at now. l.mu must be held.
func (l *leases) holds(key agent.SessionKey, owner string, now time.Time) bool {
	cur, ok := l.m[key.String()]
	return ok && cur.owner == owner && now.Before(cur.expires)
}

// live reports whether anyone holds key's lease at now. l.mu must be held.
func (l *leases) live(key agent.SessionKey, now time.Time) bool {
	cur, ok := l.m[key.String()]
	return ok && now.Before(cur.expires)
}

// claimed returns how many mailbox entries key's lease holder claimed, 0
// if nobody holds the lease at now. l.mu must be held.
func (l *leases) claimed(key agent.SessionKey, now time.Time) int {
	if cur, ok := l.m[key.String()]; ok && now.Before(cur.expires) {
		return cur.claimed
	}
	return 0
}

// sweepInterval is how often expired records are deleted: often enough that
// expired data does not pile up, rarely enough that a scan of the whole file
// costs nothing noticeable.
func sweepInterval(ret agent.Retention) time.Duration {
	return min(max(min(ret.DedupTTL, ret.HistoryTTL)/2, time.Second), time.Hour)
}

func (s *Store) sweepLoop(every time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			if err := s.sweep(now); err != nil {
				// Nothing reads expired records, so a failed sweep only
				// delays reclaiming space; the next tick tries again.
				slog.Warn("local store: sweeping expired records", "err", err)
			}
		}
	}
}

// sweep deletes dedup records, sessions, leases and governance records
// (pairings, Once marks, message counts and marks, approvals, usage counts)
// that expired before now.
func (s *Store) sweep(now time.Time) error {
	s.leases.mu.Lock()
	for _, m := range []map[string]lease{s.leases.m, s.leases.named} {
		for k, l := range m {
			if !now.Before(l.expires) {
				delete(m, k)
			}
		}
	}
	s.leases.mu.Unlock()

	return s.db.Update(func(tx *bbolt.Tx) error {
		// Keys are cloned because they point into the file's memory map.
		var dead [][]byte
		seen := tx.Bucket(bucketSeen)
		c := seen.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if !now.Before(decodeTime(v)) {
				dead = append(dead, bytes.Clone(k))
			}
		}
		for _, k := range dead {
			if err := seen.Delete(k); err != nil {
				return err
			}
		}

		dead = dead[:0]
		sessions := tx.Bucket(bucketSessions)
		c = sessions.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if sb := sessions.Bucket(k); sb != nil && !now.Before(decodeTime(sb.Get(keyExpires))) {
				dead = append(dead, bytes.Clone(k))
			}
		}
		for _, k := range dead {
			if err := sessions.DeleteBucket(k); err != nil {
				return err
			}
			if err := unmarkReady(tx, k); err != nil {
				return err
			}
		}
		return sweepGovern(tx, now)
	})
}
