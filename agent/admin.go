package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// What admins change goes through the functions here, whether it comes
// from a chat (the Dispatcher) or from the command line: each validates,
// writes with compare-and-set where two admins could race, and writes the
// audit log.

// ErrNotAdmin is returned when someone who is not an admin (here) tries to
// change what only admins may.
var ErrNotAdmin = errors.New("only an admin can change this")

// PolicyChange is an edit of a channel's stored rules.
type PolicyChange struct {
	// Version is the stored version the change was made against; the write
	// fails with ErrVersionConflict if another came first. -1: whatever is
	// stored now (a text command names its rules whole).
	Version int64
	// Set maps rule names (a tool, group:NAME, default) to a mode; an
	// empty mode removes the channel's rule, so the configured one applies.
	Set map[string]ToolMode
	// Reset removes every rule of the channel first.
	Reset bool
}

// ChangePolicy applies change to a channel's stored policy for by (who is
// recorded with each rule and in the audit log) and returns what is stored
// now. Rule names must be valid for the known tools.
func ChangePolicy(ctx context.Context, st Store, channel SessionKey, by string, change PolicyChange, known []string) (ChannelSettings, error) {
	channel = channel.Channel()
	if err := channel.Validate(); err != nil {
		return ChannelSettings{}, err
	}
	for rule, mode := range change.Set {
		if rule != DefaultRule {
			if g, ok := IsGroupRule(rule); ok {
				if _, err := ParseRuleName(GroupRule(g), known); err != nil {
					return ChannelSettings{}, fmt.Errorf("%w: %v", ErrInvalid, err)
				}
			} else if _, skill := IsSkillRule(rule); !skill && !slices.Contains(known, rule) {
				return ChannelSettings{}, fmt.Errorf("%w: no tool %q here", ErrInvalid, rule)
			}
		}
		if mode != "" {
			if _, err := ParseMode(string(mode)); err != nil {
				return ChannelSettings{}, fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
	}
	for attempt := 0; ; attempt++ {
		cur, err := st.Settings(ctx, channel)
		if err != nil {
			return ChannelSettings{}, err
		}
		if change.Version >= 0 && cur.Version != change.Version {
			return cur, ErrVersionConflict
		}
		next := cur
		next.Tools = maps.Clone(cur.Tools)
		if change.Reset {
			next.Tools = nil
		}
		now := time.Now().UTC()
		for rule, mode := range change.Set {
			if mode == "" {
				delete(next.Tools, rule)
				continue
			}
			if next.Tools == nil {
				next.Tools = map[string]Rule{}
			}
			next.Tools[rule] = Rule{Mode: mode, By: by, At: now}
		}
		stored, err := st.SetSettings(ctx, channel, next)
		if errors.Is(err, ErrVersionConflict) && change.Version < 0 && attempt < 3 {
			continue // a whole-rule edit applies on top of the other one
		}
		if err != nil {
			return cur, err
		}
		auditLog(ctx, st, AuditEntry{Action: AuditPolicySet, Platform: channel.Platform, Channel: channel.String(), User: by,
			Outcome: "ok", Detail: change.String()})
		return stored, nil
	}
}

// String says the change in rule=mode words; "rule=default" drops the
// channel's rule.
func (c PolicyChange) String() string {
	var parts []string
	if c.Reset {
		parts = append(parts, "reset")
	}
	for _, rule := range slices.Sorted(maps.Keys(c.Set)) {
		mode := string(c.Set[rule])
		if mode == "" {
			mode = "default"
		}
		parts = append(parts, rule+"="+mode)
	}
	return strings.Join(parts, " ")
}

// AllowAccess stores a grant and audits it.
func AllowAccess(ctx context.Context, st Store, g Grant) error {
	if g.Platform == "" || g.ID == "" || (g.Kind != GrantUser && g.Kind != GrantChat) {
		return fmt.Errorf("%w grant: it needs a platform, a kind (user or chat) and an ID", ErrInvalid)
	}
	if g.At.IsZero() {
		g.At = time.Now().UTC()
	}
	if err := st.Allow(ctx, g); err != nil {
		return err
	}
	auditLog(ctx, st, AuditEntry{Action: AuditAccessAllow, Platform: g.Platform, User: g.By, Outcome: "ok",
		Detail: string(g.Kind) + " " + g.ID + nameSuffix(g.Name)})
	return nil
}

// RevokeAccess removes a stored grant and audits it; it reports whether
// there was one.
func RevokeAccess(ctx context.Context, st Store, platform string, kind GrantKind, id, by string) (bool, error) {
	ok, err := st.Revoke(ctx, platform, kind, id)
	if err != nil {
		return false, err
	}
	outcome := "ok"
	if !ok {
		outcome = "none"
	}
	auditLog(ctx, st, AuditEntry{Action: AuditAccessRevoke, Platform: platform, User: by, Outcome: outcome, Detail: string(kind) + " " + id})
	return ok, nil
}

// ApprovePairing grants what the pairing code asked for and audits it.
// ErrNotFound if the code is unknown or expired.
func ApprovePairing(ctx context.Context, st Store, code, by string) (Pairing, error) {
	p, err := st.TakePairing(ctx, NormalizeCode(code))
	if err != nil {
		return Pairing{}, err
	}
	if err := st.Allow(ctx, Grant{Platform: p.Platform, Kind: p.Kind, ID: p.ID, Name: p.Name, By: by, At: time.Now().UTC()}); err != nil {
		return p, err
	}
	auditLog(ctx, st, AuditEntry{Action: AuditPairApprove, Platform: p.Platform, Channel: p.Chat.String(), User: by, Outcome: "ok",
		Detail: string(p.Kind) + " " + p.ID + nameSuffix(p.Name)})
	return p, nil
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// codeAlphabet has no letters that read like digits (no I, L, O, U).
const codeAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewCode returns a pairing code like "K7QP-M2XD": 40 random bits, easy to
// read aloud and type.
func NewCode() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	out := make([]byte, 0, 9)
	for i, c := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, codeAlphabet[int(c)%len(codeAlphabet)])
	}
	return string(out)
}

// NormalizeCode upper-cases a code as typed and restores its dash.
func NormalizeCode(s string) string {
	s = strings.ToUpper(strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, strings.TrimSpace(s)))
	if len(s) == 8 {
		return s[:4] + "-" + s[4:]
	}
	return s
}

// IsCode reports whether s, as typed, is shaped like a pairing code.
func IsCode(s string) bool {
	c := NormalizeCode(s)
	if len(c) != 9 || c[4] != '-' {
		return false
	}
	for i, r := range c {
		if i != 4 && !strings.ContainsRune(codeAlphabet, r) {
			return false
		}
	}
	return true
}

// auditLog writes e; a store that fails to write the log does not undo
// what was done, so the failure is only returned to nobody: callers that
// care use st.Audit directly.
func auditLog(ctx context.Context, st Store, e AuditEntry) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	_ = st.Audit(context.WithoutCancel(ctx), e)
}
