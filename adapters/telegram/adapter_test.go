package telegram

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
)

func newAdapter(t *testing.T, srv *faketelegram.Server) *Adapter {
	t.Helper()
	a, err := New(t.Context(), Config{Token: srv.Token(), APIURL: srv.URL(), Progress: adapters.ModeFull})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNewRefusesABadToken(t *testing.T) {
	srv := faketelegram.New(t)
	_, err := New(t.Context(), Config{Token: "123:wrong", APIURL: srv.URL()})
	if err == nil || strings.Contains(err.Error(), "123:wrong") {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := New(t.Context(), Config{Token: srv.Token(), APIURL: srv.URL(), WebhookURL: "https://x/hook"}); err == nil {
		t.Fatal("a webhook without a secret was accepted")
	}
}

// Without sendMessageDraft, an answer that takes a while to write is sent
// at its first words and edited as it grows; the final edit is the answer.
func TestLiveAnswerWithoutDrafts(t *testing.T) {
	srv := faketelegram.New(t, faketelegram.WithoutMethods("sendMessageDraft"))
	a := newAdapter(t, srv)
	q := srv.PrivateMessage(faketelegram.Alice, "explain")
	chat := strconv.FormatInt(faketelegram.Alice, 10)
	key := agent.SessionKey{Platform: Platform, Chat: chat}
	th := a.Thread(key, agent.Inbound{ReplyTo: strconv.Itoa(q.Message.MessageID)})
	ctx := t.Context()
	th.Emit(ctx, agent.TurnStarted{Key: key})
	for _, w := range strings.Fields("The build broke because the cache was stale and the lock file was old") {
		th.Emit(ctx, agent.TextDelta{Text: w + " "})
		time.Sleep(120 * time.Millisecond)
	}
	if err := th.Emit(ctx, agent.Answer{Text: "The build broke: **stale cache**."}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.BotMessages(faketelegram.Alice)
	if len(msgs) != 1 || msgs[0].Edits < 1 || msgs[0].ParseMode != "HTML" || !strings.Contains(msgs[0].Source, "<b>stale cache</b>") {
		t.Fatalf("bot messages %+v", msgs)
	}
	if msgs[0].ReplyToMessage == nil || msgs[0].ReplyToMessage.MessageID != q.Message.MessageID {
		t.Errorf("the answer does not reply to the question")
	}
	if n := srv.Count("editMessageText"); n > 3 {
		t.Errorf("%d edits for a 1.6 s answer", n)
	}
	th.(interface{ Close() error }).Close()
}

func TestRefusedMarkupFallsBackToPlainText(t *testing.T) {
	srv := faketelegram.New(t)
	a := newAdapter(t, srv)
	q := srv.PrivateMessage(faketelegram.Bob, "x")
	key := agent.SessionKey{Platform: Platform, Chat: strconv.FormatInt(faketelegram.Bob, 10)}
	th := a.Thread(key, agent.Inbound{ReplyTo: strconv.Itoa(q.Message.MessageID)})
	srv.FailNext("sendMessage", 1, 400, "Bad Request: can't parse entities: unsupported start tag")
	if err := th.Emit(t.Context(), agent.Answer{Text: "**bold** answer"}); err != nil {
		t.Fatal(err)
	}
	msgs := srv.BotMessages(faketelegram.Bob)
	if len(msgs) != 1 || msgs[0].ParseMode != "" || !strings.Contains(msgs[0].Text, "bold answer") {
		t.Fatalf("bot messages %+v", msgs)
	}
}
