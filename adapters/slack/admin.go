package slack

import (
	"context"
	"sync"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// adminTTL is how long a users.info answer stands: a demoted admin loses
// the bot's admin rights within it.
const adminTTL = 5 * time.Minute

// adminCache remembers who is a workspace admin.
type adminCache struct {
	mu  sync.Mutex
	now func() time.Time // time.Now; tests move it
	m   map[string]adminEntry
}

type adminEntry struct {
	admin bool
	at    time.Time
}

func (c *adminCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *adminCache) get(user string) (admin, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[user]
	if !ok || c.clock().Sub(e.at) >= adminTTL {
		return false, false
	}
	return e.admin, true
}

func (c *adminCache) put(user string, admin bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock()
	if c.m == nil {
		c.m = map[string]adminEntry{}
	}
	if len(c.m) >= 4096 {
		for id, e := range c.m {
			if now.Sub(e.at) >= adminTTL {
				delete(c.m, id)
			}
		}
	}
	c.m[user] = adminEntry{admin: admin, at: now}
}

// IsAdmin implements agent.AdminChecker: with Config.WorkspaceAdmins, the
// workspace's admins and owners (users.info: is_admin, is_owner or
// is_primary_owner) are the bot's admins in its channels. A person of
// another organisation is not, whatever their own workspace made them.
// Answers are kept five minutes per user; an error is not kept. Without
// WorkspaceAdmins it answers false and asks Slack nothing.
func (a *Adapter) IsAdmin(ctx context.Context, chat agent.SessionKey, userID string) (bool, error) {
	if !a.cfg.WorkspaceAdmins || chat.Platform != Platform || userID == "" {
		return false, nil
	}
	if admin, ok := a.admins.get(userID); ok {
		return admin, nil
	}
	u, err := a.api.GetUserInfoContext(ctx, userID)
	if err != nil {
		return false, err
	}
	home := u.TeamID == "" || u.TeamID == a.norm.me.TeamID || u.TeamID == chat.Team
	admin := home && !u.Deleted && !u.IsRestricted && !u.IsUltraRestricted && (u.IsAdmin || u.IsOwner || u.IsPrimaryOwner)
	a.admins.put(userID, admin)
	return admin, nil
}
