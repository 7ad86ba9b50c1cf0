package govern

import (
	"context"
	"fmt"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// The gate is the shell's [tools.JobGuard]: a background job runs on its
// channel's power to run commands (exec) and on behalf of whoever started
// it, and the shell asks at every beat whether both still hold. Denying
// exec in a channel, or revoking the person, stops its jobs within a beat;
// a job is governed by its power's rule (exec, then the default), not by
// one tool's, since the tool that started it has done its part. A job
// started where exec needed an approval was approved; ask does not stop
// it.

var _ tools.JobGuard = (*Gate)(nil)

// MayRun implements [tools.JobGuard].
func (g *Gate) MayRun(ctx context.Context, j tools.Job) error {
	if j.Session == "" {
		return nil // not started in a conversation: nobody's power to take back
	}
	key, err := agent.ParseSessionKey(j.Session)
	if err != nil {
		return tools.NotPermitted("its conversation cannot be read (" + err.Error() + ")")
	}
	p, err := g.policy(ctx, key)
	if err != nil {
		return err // cannot decide now: the job goes on
	}
	if r := p.whyPower(tools.PowerExec); r.Mode == agent.ToolDeny {
		return tools.NotPermitted(fmt.Sprintf("exec is denied in this channel (the rule %s=deny)", agent.RuleLabel(r.Rule)))
	}
	if j.User == "" {
		return nil
	}
	ok, err := g.Admitted(ctx, key, agent.User{ID: j.User, Name: j.UserName}, false)
	switch {
	case err != nil:
		return err
	case !ok:
		return tools.NotPermitted(orSomeone(j.UserName, j.User) + ", who started it, may no longer talk to me here")
	}
	return nil
}

// Stopped implements [tools.JobGuard]: the thread the job was started in
// is told, and the audit log.
func (g *Gate) Stopped(ctx context.Context, j tools.Job, why string) {
	key, err := agent.ParseSessionKey(j.Session)
	if err != nil {
		return
	}
	g.audit(ctx, AuditEntry{Action: AuditJobStopped, Platform: key.Platform, Channel: key.Channel().String(), User: AuditUser(key.Platform, j.User),
		Tool: "job", Args: agent.Shorten(j.Command, 200), Outcome: "stopped", Detail: fmt.Sprintf("job %d: %s", j.ID, why)})
	if g.cfg.Tell != nil {
		g.cfg.Tell(ctx, key, fmt.Sprintf("⏹ Stopped job %d (%s): %s.", j.ID, agent.Shorten(oneLine(j.Command), 80), why))
	}
}

// Forget implements [agent.Gate]: a session that is reset takes back what
// runs on its behalf; its running jobs are asked to stop (their replica
// stops them within a beat). It says what it stopped, for the reply.
func (g *Gate) Forget(ctx context.Context, key agent.SessionKey, by agent.User) (string, error) {
	if g.cfg.Jobs == nil {
		return "", nil
	}
	space := tools.JobSpace(key.Channel().String())
	all, err := g.cfg.Jobs.Jobs(ctx, space)
	if err != nil {
		return "", fmt.Errorf("list jobs: %w", err)
	}
	n := 0
	for _, j := range all {
		if !j.Running() || j.Session != key.String() {
			continue
		}
		if err := g.cfg.Jobs.AskStop(ctx, space, j.ID, AuditUser(key.Platform, by.ID)); err != nil {
			return "", fmt.Errorf("stop job %d: %w", j.ID, err)
		}
		g.audit(ctx, AuditEntry{Action: AuditJobStopped, Platform: key.Platform, Channel: key.Channel().String(), User: AuditUser(key.Platform, by.ID),
			Tool: "job", Args: agent.Shorten(j.Command, 200), Outcome: "asked", Detail: fmt.Sprintf("job %d: the conversation was reset", j.ID)})
		n++
	}
	switch n {
	case 0:
		return "", nil
	case 1:
		return "The job it had started is being stopped.", nil
	}
	return fmt.Sprintf("The %d jobs it had started are being stopped.", n), nil
}
