package slack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slack-go/slack"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/redact"
)

// personTTL is how long what users.info said of someone stands: a member
// made a guest, or a renamed one, is seen within it.
const personTTL = time.Hour

// lookupTimeout bounds one users.info call made before an event is acked
// (Slack wants the ack within 3 s).
const lookupTimeout = 2 * time.Second

// person is what users.info says of someone, as far as the bot needs it.
type person struct {
	name  string // display name, else real name, else handle
	team  string // their own workspace
	guest bool   // a single- or multi-channel guest (is_restricted, is_ultra_restricted)
	// unknown: Slack does not know them (user_not_found), or would not
	// say (a missing scope). Such a person is trusted with nothing more
	// than one from another organisation.
	unknown bool
}

// person returns what users.info says of id, from a cache or, on a miss,
// from one call (one at a time per person, however many of their events
// arrive at once). An error is a failure to ask (Slack unreachable, rate
// limited, slow): the caller does not guess, it lets Slack send the event
// again. An answer that Slack does not know the person is not an error.
func (a *Adapter) person(ctx context.Context, id string) (person, error) {
	if p, ok := a.people.get(id); ok {
		return p, nil
	}
	v, err, _ := a.lookups.Do(id, func() (any, error) {
		if p, ok := a.people.get(id); ok {
			return p, nil
		}
		// The first caller's cancellation must not fail the others'.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		u, err := a.api.GetUserInfoContext(ctx, id)
		var refused slack.SlackErrorResponse
		switch {
		case errors.As(err, &refused):
			switch refused.Err {
			case "user_not_found", "user_not_visible":
				p := person{unknown: true}
				a.people.put(id, p)
				return p, nil
			}
			// A missing scope or a revoked token: nobody can be known,
			// so everyone is a stranger until it is fixed. Said loudly,
			// and asked again next time.
			a.log.Error("slack users.info refused: people are treated as from another organisation until it answers (the app needs the users:read scope)",
				"user", id, "err", refused.Err, "needed", refused.Needed)
			return person{unknown: true}, nil
		case err != nil:
			return nil, fmt.Errorf("slack users.info %s: %w", id, redact.Error(err))
		}
		p := person{name: u.Profile.DisplayName, team: u.TeamID, guest: u.IsRestricted || u.IsUltraRestricted}
		for _, alt := range []string{u.RealName, u.Name} {
			if p.name == "" {
				p.name = alt
			}
		}
		a.people.put(id, p)
		return p, nil
	})
	if err != nil {
		return person{}, err
	}
	return v.(person), nil
}

// identify completes u, an event's author whose Team is the team the
// event names for them (if any), with what users.info says: their name,
// whether they are a guest, and their own workspace where the event named
// none. eventTeam is the workspace the event happened in. A person whose
// workspace is another, is not known, or cannot be told is External: an
// event with no team fields is not taken as one from inside.
func (a *Adapter) identify(ctx context.Context, u *agent.User, eventTeam string) error {
	p, err := a.person(ctx, u.ID)
	if err != nil {
		return err
	}
	if p.name != "" {
		u.Name = p.name
	}
	if u.Name == "" {
		u.Name = u.ID
	}
	u.Guest = p.guest
	if u.Team == "" {
		u.Team = p.team
	}
	u.External = p.unknown || a.norm.foreign(u.Team, eventTeam) || (p.team != "" && a.norm.foreign(p.team, eventTeam))
	return nil
}
