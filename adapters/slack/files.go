package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/slack-go/slack"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/tools"
)

// Download implements agent.Downloader: a file shared with a message is
// fetched with the bot token into the workspace under uploads/.
func (a *Adapter) Download(ctx context.Context, f agent.File, ws *tools.Workspace) (string, error) {
	if f.URL == "" {
		return "", errors.New("no download link from Slack (the app may lack the files:read scope)")
	}
	max := a.cfg.MaxFileBytes
	if err := adapters.CheckSize(f, max, "limit for shared files"); err != nil {
		return "", err
	}
	if !a.fileHostOK(f.URL) {
		return "", fmt.Errorf("the file's link is not on Slack (%s); not downloaded", hostOf(f.URL))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.BotToken)
	return adapters.Download(a.http, req, ws, f.Name, max, func(resp *http.Response) error {
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") && !strings.HasPrefix(f.MIME, "text/html") {
			// Slack answers a missing scope with its login page.
			return errors.New("download: Slack sent a web page instead of the file (the app may lack the files:read scope)")
		}
		return nil
	})
}

// fileHostOK reports whether the bot token may be sent to a file link:
// Slack's own hosts, or the configured Web API host (GovSlack, a proxy, a
// test server).
func (a *Adapter) fileHostOK(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if api, err := url.Parse(a.cfg.APIURL); err == nil && a.cfg.APIURL != "" && api.Host == u.Host {
		return true
	}
	return u.Scheme == "https" && (host == "slack.com" || strings.HasSuffix(host, ".slack.com") ||
		host == "slack-gov.com" || strings.HasSuffix(host, ".slack-gov.com"))
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return "?"
}

// maxEarlier is how many earlier messages of a thread are read for context.
const maxEarlier = 50

// EarlierMessages implements agent.ThreadReader: the thread's messages
// before the one that mentioned the bot, oldest first, as "[user] text".
func (a *Adapter) EarlierMessages(ctx context.Context, key agent.SessionKey, trigger agent.Inbound) (string, error) {
	if trigger.MessageID == key.Thread || key.Thread == "" {
		return "", nil // the message starts the thread: nothing came before
	}
	msgs, _, _, err := a.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
		ChannelID: key.Chat, Timestamp: key.Thread, Limit: maxEarlier + 1,
	})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	n := 0
	for _, m := range msgs {
		if m.Timestamp == trigger.MessageID || n == maxEarlier {
			break
		}
		if m.Text == "" {
			continue
		}
		who := m.User
		if m.BotID != "" {
			who = "bot " + m.BotID
		}
		if m.User == a.norm.me.BotUserID {
			who = "you"
		}
		fmt.Fprintf(&b, "[%s] %s\n", who, a.norm.stripMention(m.Text))
		n++
	}
	return b.String(), nil
}
