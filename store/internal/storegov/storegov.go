// Package storegov holds what store/local and store/redis share to implement
// govern.Store: argument checks, record encodings and limits, so that
// both stores accept, refuse and keep the same things.
package storegov

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
)

const (
	// DefaultAuditCap is how many audit entries a store keeps when its
	// options do not say.
	DefaultAuditCap = 100_000
	// DefaultAuditLimit is what AuditLog returns at most when the query
	// has no Limit.
	DefaultAuditLimit = 1000
	// ApprovalKeep is how long an approval is kept after its deadline, so
	// that a late click is answered with what became of it.
	ApprovalKeep = 24 * time.Hour
	// UsageTTL is how long a channel's daily token count is kept after its
	// last change: a budget reads today's, an admin may look back a week.
	UsageTTL = 8 * 24 * time.Hour
	// AuditSkew is how far ahead of the store's clock an audit entry's
	// Time may be and still be found by a query's Since. The Redis store
	// reads the log back only to the entries it appended since Since minus
	// this, rather than scanning the whole log.
	AuditSkew = 5 * time.Minute
)

// Escape quotes the characters that separate the parts of store keys
// (':'), open or close a Redis Cluster hash tag ('{', '}') and quote
// ('%'), so that a name from outside (a user ID, an approval ID) can be
// put into a key without running into its neighbours.
func Escape(s string) string {
	if !strings.ContainsAny(s, "%:{}") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%', ':', '{', '}':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Subject names what a grant or a pairing is for: "telegram:user:123",
// each part escaped, so distinct subjects never share a name.
func Subject(platform string, kind govern.GrantKind, id string) string {
	return Escape(platform) + ":" + Escape(string(kind)) + ":" + Escape(id)
}

// CheckSubject checks the arguments that name a grant.
func CheckSubject(platform string, kind govern.GrantKind, id string) error {
	if platform == "" || id == "" || (kind != govern.GrantUser && kind != govern.GrantChat) {
		return fmt.Errorf("%w grant: it needs a platform, a kind (user or chat) and an ID", agent.ErrInvalid)
	}
	return nil
}

// SortGrants sorts grants by platform, kind, then ID, as Grants returns them.
func SortGrants(gs []govern.Grant) {
	slices.SortFunc(gs, func(a, b govern.Grant) int {
		if c := strings.Compare(a.Platform, b.Platform); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Pairing is a pairing request as stored: the request and its subject,
// which a store needs to drop the subject's index entry with the request.
type Pairing struct {
	govern.Pairing
	Subject string `json:"subject"`
}

// CheckPairing checks a request for Pair at now.
func CheckPairing(p govern.Pairing, now time.Time) error {
	if err := CheckSubject(p.Platform, p.Kind, p.ID); err != nil {
		return err
	}
	if p.Code == "" {
		return fmt.Errorf("%w pairing: empty code", agent.ErrInvalid)
	}
	if !p.Expires.After(now) {
		return fmt.Errorf("%w pairing: it expires at %v, which is past", agent.ErrInvalid, p.Expires)
	}
	return nil
}

// SortPairings sorts requests oldest first (by Created, then code), as
// Pairings returns them.
func SortPairings(ps []govern.Pairing) {
	slices.SortFunc(ps, func(a, b govern.Pairing) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Code, b.Code)
	})
}

// CheckApproval checks a new approval and returns it in the pending state.
func CheckApproval(a agent.Approval) (agent.Approval, error) {
	if a.ID == "" {
		return a, fmt.Errorf("%w approval: empty ID", agent.ErrInvalid)
	}
	if a.Deadline.IsZero() {
		return a, fmt.Errorf("%w approval %s: no deadline", agent.ErrInvalid, a.ID)
	}
	switch a.State {
	case "":
		a.State = agent.ApprovalPending
	case agent.ApprovalPending:
	default:
		return a, fmt.Errorf("%w approval %s: a new approval is pending, not %s", agent.ErrInvalid, a.ID, a.State)
	}
	return a, nil
}

// ApprovalTTL is how long an approval with deadline is kept from now.
func ApprovalTTL(deadline, now time.Time) time.Duration {
	return deadline.Add(ApprovalKeep).Sub(now)
}

// Decision is the part of an approval that DecideApproval writes, with the
// JSON names of agent.Approval's fields, so that decoding it onto a stored
// approval applies it.
type Decision struct {
	State     agent.ApprovalState `json:"state"`
	DecidedBy agent.User          `json:"decided_by,omitzero"`
	DecidedAt time.Time           `json:"decided_at,omitzero"`
	Always    bool                `json:"always,omitempty"`
	Why       string              `json:"why,omitempty"`
}

// CheckDecision checks d and returns what to store, its time set to now if
// it had none.
func CheckDecision(id string, d govern.ApprovalDecision, now time.Time) (Decision, error) {
	switch d.State {
	case agent.ApprovalApproved, agent.ApprovalDenied, agent.ApprovalExpired:
	default:
		return Decision{}, fmt.Errorf("%w decision of approval %s: state %q is not a decision", agent.ErrInvalid, id, d.State)
	}
	if d.At.IsZero() {
		d.At = now.UTC()
	}
	return Decision{State: d.State, DecidedBy: d.By, DecidedAt: d.At, Always: d.Always, Why: d.Why}, nil
}

// Apply writes d onto a.
func (d Decision) Apply(a *agent.Approval) {
	a.State, a.DecidedBy, a.DecidedAt, a.Always, a.Why = d.State, d.DecidedBy, d.DecidedAt, d.Always, d.Why
}

// Merge decodes a stored approval and, if there is one, its decision.
func Merge(approval, decision []byte) (agent.Approval, error) {
	var a agent.Approval
	if err := json.Unmarshal(approval, &a); err != nil {
		return a, fmt.Errorf("approval: %w", err)
	}
	if len(decision) > 0 {
		var d Decision
		if err := json.Unmarshal(decision, &d); err != nil {
			return a, fmt.Errorf("approval decision: %w", err)
		}
		d.Apply(&a)
	}
	return a, nil
}

// CheckName checks the name and duration of a Once.
func CheckName(what, name string, d time.Duration) error {
	if name == "" {
		return fmt.Errorf("%w %s: empty name", agent.ErrInvalid, what)
	}
	if d <= 0 {
		return fmt.Errorf("%w %s %q: duration %v <= 0", agent.ErrInvalid, what, name, d)
	}
	return nil
}

// CheckCountMessage checks the arguments of CountMessage.
func CheckCountMessage(who, message string, limit int64, window, dedup time.Duration) error {
	if who == "" || message == "" {
		return fmt.Errorf("%w count message: empty author (%q) or message (%q)", agent.ErrInvalid, who, message)
	}
	if limit < 0 || window <= 0 || dedup <= 0 {
		return fmt.Errorf("%w count message: limit %d, window %v, dedup %v (want a limit >= 0 and durations > 0)", agent.ErrInvalid, limit, window, dedup)
	}
	return nil
}

// MessageCount is CountMessage's answer when the author's count is n
// after the call, which counted the message (first) or found it counted:
// only the message counted as limit+1 is told of, so a person is told
// once a window whatever the number of replicas.
func MessageCount(n int64, first bool, limit int64) govern.MessageCount {
	return govern.MessageCount{N: n, First: first, Tell: first && n == limit+1}
}

// Window returns the number of the fixed window of length w (aligned to the
// Unix epoch) that now falls in, and w in milliseconds (at least 1).
func Window(now time.Time, w time.Duration) (n, wms int64) {
	wms = max(w.Milliseconds(), 1)
	return now.UnixMilli() / wms, wms
}

// CheckUsage checks the arguments of AddUsage and Usage.
func CheckUsage(channel agent.SessionKey, day string, tokens int64) error {
	if err := channel.Validate(); err != nil {
		return err
	}
	if _, err := time.Parse(time.DateOnly, day); err != nil || len(day) != len(time.DateOnly) {
		return fmt.Errorf("%w usage: day %q is not YYYY-MM-DD", agent.ErrInvalid, day)
	}
	if tokens < 0 {
		return fmt.Errorf("%w usage: %d tokens < 0", agent.ErrInvalid, tokens)
	}
	return nil
}

// AuditLimit is how many entries q asks for at most.
func AuditLimit(q govern.AuditQuery) int {
	if q.Limit <= 0 {
		return DefaultAuditLimit
	}
	return q.Limit
}

// AuditMatch reports whether e is one q selects.
func AuditMatch(e govern.AuditEntry, q govern.AuditQuery) bool {
	return (q.Channel == "" || e.Channel == q.Channel) && !e.Time.Before(q.Since)
}

// DecodeSettings decodes a channel's stored settings. Settings written
// before rules recorded who set them hold a bare mode per rule
// ({"shell":"deny"}); those read as rules set by nobody known, at no known
// time, so that a policy an admin set before an upgrade still holds.
func DecodeSettings(data []byte) (agent.ChannelSettings, error) {
	var cs agent.ChannelSettings
	err := json.Unmarshal(data, &cs)
	if err == nil {
		return cs, nil
	}
	var legacy struct {
		Version int64                     `json:"version"`
		Tools   map[string]agent.ToolMode `json:"tools"`
	}
	if json.Unmarshal(data, &legacy) != nil {
		return agent.ChannelSettings{}, err
	}
	cs = agent.ChannelSettings{Version: legacy.Version}
	for name, mode := range legacy.Tools {
		if cs.Tools == nil {
			cs.Tools = map[string]agent.Rule{}
		}
		cs.Tools[name] = agent.Rule{Mode: mode}
	}
	return cs, nil
}
