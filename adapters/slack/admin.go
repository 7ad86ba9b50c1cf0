package slack

import (
	"context"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// adminTTL is how long a users.info answer stands: a demoted admin loses
// the bot's admin rights within it.
const adminTTL = 5 * time.Minute

// maxPeople bounds each per-person cache.
const maxPeople = 10000

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
	home := u.TeamID != "" && (u.TeamID == a.norm.me.TeamID || u.TeamID == chat.Team)
	admin := home && !u.Deleted && !u.IsRestricted && !u.IsUltraRestricted && (u.IsAdmin || u.IsOwner || u.IsPrimaryOwner)
	a.admins.put(userID, admin)
	return admin, nil
}
