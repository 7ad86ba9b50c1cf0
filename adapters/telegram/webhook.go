package telegram

import (
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"

	"github.com/firstmate/firstmate/agent"
)

// Routes adds the webhook endpoint when a webhook is configured.
func (a *Adapter) Routes(mux *http.ServeMux, d agent.Submitter) {
	if a.cfg.WebhookURL == "" {
		return
	}
	mux.Handle("POST /telegram/webhook", a.webhookHandler(d))
}

// webhookHandler checks the secret in constant time and answers 200 only
// once the update is recorded; an error makes Telegram deliver it again.
func (a *Adapter) webhookHandler(d agent.Submitter) http.Handler {
	secret := []byte(a.cfg.WebhookSecret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("X-Telegram-Bot-Api-Secret-Token"))
		if subtle.ConstantTimeCompare(got, secret) != 1 {
			a.log.Warn("telegram webhook request with a wrong secret refused")
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var u update
		if err := json.Unmarshal(body, &u); err != nil {
			// It can never be read, and Telegram would send it again and
			// again: answer its click, if it is one, and take it.
			a.log.Warn("telegram update not understood; skipped", "err", err)
			a.answerUnreadable(r.Context(), body)
			w.WriteHeader(http.StatusOK)
			return
		}
		if err := a.handle(r.Context(), d, &u); err != nil {
			a.log.Error("telegram update not recorded; Telegram will deliver it again", "err", err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
