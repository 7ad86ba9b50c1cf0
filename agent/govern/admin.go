package govern

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// What admins change goes through the functions here, whether it comes
// from a chat (the gate) or from the command line: each validates, writes
// with compare-and-set where two admins could race, and writes the audit
// log.

// ChangePolicy applies change to a channel's stored policy for by (who is
// recorded with each rule and in the audit log) and returns what is stored
// now. Rule names must be valid for the tools ts.
func ChangePolicy(ctx context.Context, st Store, channel agent.SessionKey, by string, change agent.PolicyChange, ts Tools) (agent.ChannelSettings, error) {
	channel = channel.Channel()
	if err := channel.Validate(); err != nil {
		return agent.ChannelSettings{}, err
	}
	for rule, mode := range change.Set {
		if err := validRule(rule, ts); err != nil {
			return agent.ChannelSettings{}, err
		}
		if mode != "" {
			if _, err := agent.ParseMode(string(mode)); err != nil {
				return agent.ChannelSettings{}, fmt.Errorf("%w: %v", agent.ErrInvalid, err)
			}
		}
	}
	for attempt := 0; ; attempt++ {
		cur, err := st.Settings(ctx, channel)
		if err != nil {
			return agent.ChannelSettings{}, err
		}
		if change.Version >= 0 && cur.Version != change.Version {
			return cur, agent.ErrVersionConflict
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
				next.Tools = map[string]agent.Rule{}
			}
			next.Tools[rule] = agent.Rule{Mode: mode, By: by, At: now}
		}
		stored, err := st.SetSettings(ctx, channel, next)
		if errors.Is(err, agent.ErrVersionConflict) && change.Version < 0 && attempt < 3 {
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

// SetTimeZone sets channel's time zone to name for by (recorded in the
// audit log), or clears it with name "" so the configured zone applies,
// and returns what is stored now. A name agent.ParseTimeZone refuses is an
// error wrapping agent.ErrBadTimeZone, and nothing changes.
func SetTimeZone(ctx context.Context, st Store, channel agent.SessionKey, by, name string) (agent.ChannelSettings, error) {
	channel = channel.Channel()
	if err := channel.Validate(); err != nil {
		return agent.ChannelSettings{}, err
	}
	if name != "" {
		loc, err := agent.ParseTimeZone(name)
		if err != nil {
			return agent.ChannelSettings{}, err
		}
		name = loc.String() // "utc" is stored as UTC
	}
	for attempt := 0; ; attempt++ {
		cur, err := st.Settings(ctx, channel)
		if err != nil {
			return agent.ChannelSettings{}, err
		}
		next := cur
		next.TimeZone = name
		stored, err := st.SetSettings(ctx, channel, next)
		if errors.Is(err, agent.ErrVersionConflict) && attempt < 3 {
			continue // a policy change came first: set the zone on top of it
		}
		if err != nil {
			return cur, err
		}
		detail := "time_zone=" + name
		if name == "" {
			detail = "time_zone=default"
		}
		if cur.TimeZone != "" {
			detail += " (was " + cur.TimeZone + ")"
		}
		auditLog(ctx, st, AuditEntry{Action: AuditTimeZoneSet, Platform: channel.Platform, Channel: channel.String(), User: by,
			Outcome: "ok", Detail: detail})
		return stored, nil
	}
}

// AllowAccess stores a grant and audits it.
func AllowAccess(ctx context.Context, st Store, g Grant) error {
	if g.Platform == "" || g.ID == "" || (g.Kind != GrantUser && g.Kind != GrantChat) {
		return fmt.Errorf("%w grant: it needs a platform, a kind (user or chat) and an ID", agent.ErrInvalid)
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
// there was one. What runs on the revoked person's (or chat's) behalf
// asks the gate again before it goes on: their pending approvals can no
// longer be approved, their jobs are stopped at their next beat, their
// schedules do not post.
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
// agent.ErrNotFound if the code is unknown or expired.
func ApprovePairing(ctx context.Context, st Store, code, by string) (Pairing, error) {
	p, err := st.TakePairing(ctx, agent.NormalizeCode(code))
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

// auditLog writes e; a store that fails to write the log does not undo
// what was done, so the failure is only returned to nobody: callers that
// care use st.Audit directly.
func auditLog(ctx context.Context, st Store, e AuditEntry) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	_ = st.Audit(context.WithoutCancel(ctx), e)
}
