package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

// Interactivity: a click on one of our buttons (an approval, the policy
// screen) and the tools modal's submission. Both transports bring the same
// slack.InteractionCallback here; what Slack waits for (the ack's payload,
// the HTTP answer) is returned, and what follows the answer (telling the
// person, replacing the screen) runs after it.

// maxActions caps the actions of one block_actions payload we act on:
// Slack sends one per click.
const maxActions = 5

// decideTimeout bounds what must happen before a view submission is
// answered: Slack waits three seconds.
const decideTimeout = 2500 * time.Millisecond

// interactivityHandler serves POST /slack/interactivity (signature
// checked already): the form's payload field holds the JSON. Whatever the
// payload, the answer is 200: Slack does not send an interaction again,
// and an error only shows the person a warning sign.
func (a *Adapter) interactivityHandler(d agent.Submitter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, err := url.ParseQuery(string(body))
		var cb slack.InteractionCallback
		if err == nil {
			err = json.Unmarshal([]byte(form.Get("payload")), &cb)
		}
		if err != nil {
			a.log.Debug("slack interaction that is not one", "err", err)
			w.WriteHeader(http.StatusOK)
			return
		}
		reply, then := a.interaction(r.Context(), d, cb)
		respond(w, r, reply, then)
	})
}

// interaction decides what to do about one interaction: the answer Slack
// waits for (nil for an empty one, which closes a submitted modal) and
// what to do after it (nil for nothing). Payloads that are not ours, or
// name no channel or person we can read, are ignored.
func (a *Adapter) interaction(ctx context.Context, d agent.Submitter, cb slack.InteractionCallback) (reply any, then func(context.Context)) {
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		return nil, a.clicked(d, cb)
	case slack.InteractionTypeViewSubmission:
		if cb.View.CallbackID != toolsCallbackID {
			a.log.Debug("slack view submission that is not ours", "callback_id", cb.View.CallbackID)
			return nil, nil
		}
		ctx, cancel := context.WithTimeout(ctx, decideTimeout)
		defer cancel()
		return a.submitTools(ctx, d, cb)
	}
	a.log.Debug("slack interaction ignored", "type", cb.Type)
	return nil, nil
}

// click is where a click on one of our messages happened, and by whom.
type click struct {
	key         agent.SessionKey // the channel's key, in the message's thread
	user        agent.User
	channel     string
	threadTS    string
	messageTS   string
	ephemeral   bool // the message was ephemeral: only its response_url can change it
	responseURL string
}

// clicked returns what to do about the clicks of a block_actions payload
// on our buttons, nil if there are none we can act on. The clicks are
// handled after the ack: a decision is a store write and an ephemeral
// message, and Slack wants its ack within three seconds whatever happens.
func (a *Adapter) clicked(d agent.Submitter, cb slack.InteractionCallback) func(context.Context) {
	c, ok := a.clickOf(cb)
	if !ok {
		return nil
	}
	var values []string
	for _, act := range cb.ActionCallback.BlockActions {
		if act == nil || act.Type != slack.ActionType(slack.METButton) || !strings.HasPrefix(act.ActionID, actionPrefix) || act.Value == "" {
			continue
		}
		values = append(values, act.Value)
		if len(values) == maxActions {
			break
		}
	}
	if len(values) == 0 {
		a.log.Debug("slack block_actions without a button of ours")
		return nil
	}
	return func(ctx context.Context) {
		c.user = a.interactionUser(ctx, c.user, c.key.Team)
		for _, v := range values {
			res, err := adapters.HandleClick(ctx, d, c.key, c.user, v)
			if errors.Is(err, adapters.ErrNotOurs) {
				a.log.Debug("slack button that is not ours", "value", truncateRunes(v, 80))
				continue
			}
			if err != nil {
				a.log.Warn("slack click not handled", "chat", c.key.String(), "user", c.user.ID, "err", err)
			}
			a.answerClick(ctx, c, res)
		}
	}
}

// clickOf reads where a block_actions payload comes from.
func (a *Adapter) clickOf(cb slack.InteractionCallback) (click, bool) {
	c := click{
		channel:     orDefault(cb.Container.ChannelID, cb.Channel.ID),
		messageTS:   orDefault(cb.Container.MessageTs, cb.Message.Timestamp),
		threadTS:    orDefault(cb.Message.ThreadTimestamp, cb.Container.ThreadTs),
		ephemeral:   cb.Container.IsEphemeral,
		responseURL: cb.ResponseURL,
	}
	if !validID(c.channel, "CDG") || !validID(cb.User.ID, "UW") || !validTS(c.messageTS) || (c.threadTS != "" && !validTS(c.threadTS)) {
		a.log.Debug("slack click from a place or person we cannot read", "channel", truncateRunes(c.channel, 40), "user", truncateRunes(cb.User.ID, 40))
		return click{}, false
	}
	c.key = agent.SessionKey{Platform: Platform, Team: orDefault(cb.Team.ID, a.norm.me.TeamID), Chat: c.channel, Thread: c.threadTS}
	c.user = agent.User{ID: cb.User.ID, Name: cb.User.Name, Team: cb.User.TeamID}
	return c, true
}

// interactionUser completes the person who clicked or submitted (u, as
// the payload names them) from users.info. A click is acked
// whatever happens (Slack never sends it again), so where users.info
// cannot be asked the person is taken as from outside: a click that needs
// trust fails, and they can click again.
func (a *Adapter) interactionUser(ctx context.Context, u agent.User, eventTeam string) agent.User {
	if err := a.identify(ctx, &u, eventTeam); err != nil {
		a.log.Warn("slack: a click's author could not be looked up; taken as from another organisation", "user", u.ID, "err", err)
		u.External = true
	}
	return u
}

// answerClick tells the person what their click did, in an ephemeral
// message beside the clicked one, and replaces the clicked message when
// the click changed it (a policy screen).
func (a *Adapter) answerClick(ctx context.Context, c click, res adapters.Clicked) {
	s := &surface{a: a, channel: c.channel, threadTS: c.threadTS, allowed: map[string]bool{}}
	if res.Replace != nil {
		parts := s.Format(*res.Replace)
		if len(parts) > 0 {
			p := parts[0]
			p.Buttons = parts[len(parts)-1].Buttons
			var err error
			if c.ephemeral {
				// chat.update cannot reach an ephemeral message; its
				// response_url can.
				if c.responseURL != "" {
					_, _, _, err = a.api.SendMessageContext(ctx, "", append(s.options(p, true), slack.MsgOptionReplaceOriginal(c.responseURL))...)
				}
			} else {
				err = s.Edit(ctx, adapters.MessageID(c.messageTS), p)
			}
			if err != nil {
				a.log.Warn("slack: replacing the clicked message failed", "chat", c.key.String(), "err", err)
			}
		}
	}
	if res.Notice != "" {
		a.tell(ctx, c.channel, c.user.ID, c.threadTS, res.Notice)
	}
}

// validID reports whether id looks like a Slack ID starting with one of
// the letters in kinds: C… channels, D… DMs, G… private channels, U… or
// W… users.
func validID(id, kinds string) bool {
	if len(id) < 3 || len(id) > 32 || !strings.ContainsRune(kinds, rune(id[0])) {
		return false
	}
	for _, c := range id {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// validTS reports whether ts looks like a message's ts: "1700000000.000100".
func validTS(ts string) bool {
	sec, frac, ok := strings.Cut(ts, ".")
	if !ok || sec == "" || frac == "" || len(ts) > 32 {
		return false
	}
	for _, c := range sec + frac {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
