package govern

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
	"github.com/firstmate/firstmate/tools/skills"
)

// Budgets bound what a channel and a person may spend. Zero means no limit.
type Budgets struct {
	ChannelTokensPerDay   int64
	UserMessagesPerMinute int
}

// SkillCatalog says which skills a channel has (tools/skills' Catalog),
// for the policy screens, and which tool loads them.
type SkillCatalog interface {
	ToolName() string
	Available(ctx context.Context, ws *tools.Workspace) ([]skills.Skill, []skills.Problem)
}

// Config wires a Gate. Store is required.
type Config struct {
	Store Store
	// Tools are the tools the policy governs, each with its power.
	Tools *tools.Set
	// Policy is the configured tool policy every channel starts from;
	// admins' rules per channel are in the store.
	Policy Defaults
	// Access is each platform's access rule, by SessionKey.Platform; a
	// platform without one (the terminal) is open.
	Access map[string]Access
	// Admins reports whether u is one of the bot's admins on platform
	// (the config's list; a Slack admin's ID counts with its team).
	Admins          func(platform string, u agent.User) bool
	Budgets         Budgets
	ApprovalTimeout time.Duration // default 5m
	PairingTTL      time.Duration // how long a pairing code is valid; default 1h
	// Platforms are asked for their own admins ([agent.AdminChecker]).
	Platforms map[string]agent.Platform
	// Skills, if set, lists the channels' skills on the policy screens;
	// Workspaces is where a channel's own are.
	Skills     SkillCatalog
	Workspaces tools.Workspaces
	Jobs       tools.JobBoard // the background jobs admins list and stop; nil: none
	// Tell, if set, leaves a note in a session's thread (a job the gate
	// stopped says so where it was started).
	Tell     func(ctx context.Context, key agent.SessionKey, text string)
	Observer agent.Observer // nil: none
	Logger   *slog.Logger
}

// Gate is firstmate's one gate for every power: see the package comment.
// It is safe for concurrent use.
type Gate struct {
	cfg Config
	log *slog.Logger
}

var _ agent.Gate = (*Gate)(nil)

// New returns a gate.
func New(cfg Config) *Gate {
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 5 * time.Minute
	}
	if cfg.PairingTTL <= 0 {
		cfg.PairingTTL = time.Hour
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gate{cfg: cfg, log: log}
}

// known are the tools as they are now, without waiting for MCP servers
// still starting: the gate answers in Submit, which must not wait.
func (g *Gate) known() Tools {
	if g.cfg.Tools == nil {
		return nil
	}
	return g.cfg.Tools.Now()
}

// policy resolves a channel's policy from the config and the store.
func (g *Gate) policy(ctx context.Context, chat agent.SessionKey) (*Policy, error) {
	s, err := g.cfg.Store.Settings(ctx, chat.Channel())
	if err != nil {
		return nil, fmt.Errorf("read channel policy: %w", err)
	}
	return NewPolicy(chat, g.cfg.Policy, s, g.known()), nil
}

// Policy implements [agent.Gate].
func (g *Gate) Policy(ctx context.Context, chat agent.SessionKey, u agent.User) (agent.PolicyView, error) {
	p, err := g.policy(ctx, chat)
	if err != nil {
		return agent.PolicyView{}, err
	}
	return p.View(g.channelSkills(ctx, chat), g.Admin(ctx, chat, u)), nil
}

// SetPolicy implements [agent.Gate].
func (g *Gate) SetPolicy(ctx context.Context, chat agent.SessionKey, u agent.User, change agent.PolicyChange) (agent.PolicyView, error) {
	if !g.Admin(ctx, chat, u) {
		g.audit(ctx, AuditEntry{Action: AuditPolicyRefused, Platform: chat.Platform, Channel: chat.Channel().String(), User: AuditUser(chat.Platform, u.ID),
			Outcome: "not an admin", Detail: change.String()})
		return agent.PolicyView{}, agent.ErrNotAdmin
	}
	if _, err := ChangePolicy(ctx, g.cfg.Store, chat, AuditUser(chat.Platform, u.ID), change, g.known()); err != nil {
		return agent.PolicyView{}, err
	}
	return g.Policy(ctx, chat, u)
}

// audit writes e; a failure is logged, not returned: what was done stands.
func (g *Gate) audit(ctx context.Context, e AuditEntry) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := g.cfg.Store.Audit(actx, e); err != nil {
		g.log.Warn("audit log write failed", "action", e.Action, "err", err)
	}
}

// Audit writes e to the audit log, for what governs outside the gate (a
// schedule made or removed); a failure is logged.
func (g *Gate) Audit(ctx context.Context, e AuditEntry) { g.audit(ctx, e) }

// MayPost reports whether a schedule made by by may post into key's
// session now: by may still talk to the bot there, and the channel still
// allows work later (the later power). A refusal wraps
// tools.ErrNotPermitted; another error is a failure to decide.
func (g *Gate) MayPost(ctx context.Context, key agent.SessionKey, by agent.User) error {
	p, err := g.policy(ctx, key)
	if err != nil {
		return err
	}
	if r := p.whyPower(tools.PowerLater); r.Mode == agent.ToolDeny {
		return tools.NotPermitted(fmt.Sprintf("work later is denied in this channel (the rule %s=deny)", agent.RuleLabel(r.Rule)))
	}
	ok, err := g.Admitted(ctx, key, by, false)
	switch {
	case err != nil:
		return err
	case !ok:
		return tools.NotPermitted(by.Display() + ", who made it, may no longer talk to me here")
	}
	return nil
}

// SetTimeZone sets chat's time zone for u, an admin there; anyone else is
// refused (agent.ErrNotAdmin), and the refusal audited.
func (g *Gate) SetTimeZone(ctx context.Context, chat agent.SessionKey, u agent.User, name string) (agent.ChannelSettings, error) {
	if !g.Admin(ctx, chat, u) {
		g.audit(ctx, AuditEntry{Action: AuditTimeZoneRefused, Platform: chat.Platform, Channel: chat.Channel().String(),
			User: AuditUser(chat.Platform, u.ID), Outcome: "not an admin", Detail: "time_zone=" + agent.Shorten(name, 80)})
		return agent.ChannelSettings{}, agent.ErrNotAdmin
	}
	return SetTimeZone(ctx, g.cfg.Store, chat, AuditUser(chat.Platform, u.ID), name)
}

// skillTool is the tool that loads skills, or "" when there are none.
func (g *Gate) skillTool() string {
	if g.cfg.Skills == nil {
		return ""
	}
	return g.cfg.Skills.ToolName()
}

// channelSkills names the skills a turn in chat's channel could load
// before policy: the configured ones and the channel's own, read from its
// workspace if it has one (a screen does not create it). nil when this bot
// offers no skills.
func (g *Gate) channelSkills(ctx context.Context, chat agent.SessionKey) []string {
	if g.cfg.Skills == nil {
		return nil
	}
	var ws *tools.Workspace
	name := chat.Channel().String()
	if g.cfg.Workspaces.Dir != "" {
		if _, err := os.Stat(tools.WorkspacePath(g.cfg.Workspaces.Dir, name)); err == nil {
			if w, err := g.cfg.Workspaces.Open(name); err == nil {
				defer w.Close()
				ws = w
			} else {
				g.log.Warn("open workspace for the policy screen", "chat", name, "err", err)
			}
		}
	}
	list, _ := g.cfg.Skills.Available(ctx, ws)
	names := make([]string, 0, len(list))
	for _, sk := range list {
		names = append(names, sk.Name)
	}
	return names
}

func today() string { return time.Now().UTC().Format(time.DateOnly) }
