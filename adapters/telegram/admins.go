package telegram

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/firstmate/firstmate/agent"
)

// adminTTL is how long a group's administrators are remembered: a person
// demoted in Telegram stops counting within a minute, and a burst of
// clicks costs one call.
const adminTTL = time.Minute

// IsAdmin implements agent.AdminChecker: with Config.ChatAdmins, the
// creator and administrators of a group or supergroup (getChatAdministrators)
// are the bot's admins there. A private chat has no administrators, and a
// channel's are not asked; without ChatAdmins nobody is one, and Telegram
// is not asked.
func (a *Adapter) IsAdmin(ctx context.Context, chat agent.SessionKey, userID string) (bool, error) {
	if !a.cfg.ChatAdmins || chat.Platform != Platform || userID == "" {
		return false, nil
	}
	id, err := strconv.ParseInt(chat.Chat, 10, 64)
	if err != nil || id >= 0 {
		return false, nil // private chats have positive IDs, groups negative
	}
	if _, ok := a.channels.Load(id); ok {
		return false, nil
	}
	admins, err := a.admins.get(ctx, id, a.fetchAdmins)
	if err != nil {
		return false, err
	}
	return admins[userID], nil
}

// fetchAdmins asks Telegram for a chat's creator and administrators.
func (a *Adapter) fetchAdmins(ctx context.Context, chat int64) (map[string]bool, error) {
	var members []struct {
		Status string `json:"status"`
		User   user   `json:"user"`
	}
	if err := a.call(ctx, "getChatAdministrators", tgbotapi.Params{"chat_id": strconv.FormatInt(chat, 10)}, &members); err != nil {
		return nil, fmt.Errorf("telegram getChatAdministrators: %w", err)
	}
	ids := make(map[string]bool, len(members))
	for _, m := range members {
		if (m.Status == "creator" || m.Status == "administrator") && m.User.ID != 0 {
			ids[strconv.FormatInt(m.User.ID, 10)] = true
		}
	}
	return ids, nil
}

// adminCache remembers each chat's administrators for adminTTL. A failed
// lookup is not remembered.
type adminCache struct {
	mu    sync.Mutex
	now   func() time.Time // time.Now; tests move it
	chats map[int64]adminEntry
}

type adminEntry struct {
	ids map[string]bool
	at  time.Time
}

func (c *adminCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *adminCache) get(ctx context.Context, chat int64, fetch func(context.Context, int64) (map[string]bool, error)) (map[string]bool, error) {
	c.mu.Lock()
	e, ok := c.chats[chat]
	now := c.clock()
	c.mu.Unlock()
	if ok && now.Sub(e.at) < adminTTL {
		return e.ids, nil
	}
	ids, err := fetch(ctx, chat)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chats == nil {
		c.chats = map[int64]adminEntry{}
	}
	now = c.clock()
	for k, old := range c.chats {
		if now.Sub(old.at) >= adminTTL {
			delete(c.chats, k) // the cache holds the chats of the last minute, no more
		}
	}
	c.chats[chat] = adminEntry{ids: ids, at: now}
	return ids, nil
}

var _ agent.AdminChecker = (*Adapter)(nil)
