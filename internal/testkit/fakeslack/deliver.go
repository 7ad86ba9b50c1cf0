package fakeslack

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Delivery is the answer of the app to an HTTP delivery.
type Delivery struct {
	Status int
	Header http.Header
	Body   []byte
}

// DeliverOption changes how DeliverHTTP signs or marks a request.
type DeliverOption func(*deliverConfig)

type deliverConfig struct {
	at          time.Time
	badSig      bool
	retryNum    int
	retryReason string
}

// BadSignature signs the request with another secret: a forged request.
func BadSignature() DeliverOption { return func(c *deliverConfig) { c.badSig = true } }

// StaleTimestamp signs the request correctly but dates it six minutes ago,
// past the five minutes an app must accept: a replayed request.
func StaleTimestamp() DeliverOption {
	return func(c *deliverConfig) { c.at = time.Now().Add(-6 * time.Minute) }
}

// SignedAt dates and signs the request at t.
func SignedAt(t time.Time) DeliverOption { return func(c *deliverConfig) { c.at = t } }

// Retry marks the request as Slack's retry number n of an event, with
// X-Slack-Retry-Num and X-Slack-Retry-Reason (http_timeout, http_error,
// connection_failed…).
func Retry(n int, reason string) DeliverOption {
	return func(c *deliverConfig) { c.retryNum, c.retryReason = n, reason }
}

// Interaction is an interaction payload (block_actions, view_submission…)
// for DeliverHTTP, which posts it as Slack does: a form with one field,
// payload, holding the JSON.
type Interaction struct{ Payload any }

// DeliverHTTP posts to an app's endpoint as the Events API does, signed
// with signingSecret (v0: HMAC-SHA256 of "v0:timestamp:body" in
// X-Slack-Signature, the timestamp in X-Slack-Request-Timestamp), and
// returns the app's answer.
//
// payload is an Event from a builder or any other value SendEvent takes
// (a JSON body), a slack.SlashCommand (the form Slack posts to a command's
// URL), an Interaction, or url.Values (a form as it is). A message event is
// stored, as with SendEvent.
func (s *Server) DeliverHTTP(ctx context.Context, endpoint string, payload any, signingSecret string, opts ...DeliverOption) (Delivery, error) {
	cfg := deliverConfig{at: time.Now()}
	for _, o := range opts {
		o(&cfg)
	}
	body, contentType, err := s.deliveryBody(payload)
	if err != nil {
		return Delivery{}, err
	}
	if contentType == "application/json" {
		s.observe(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return Delivery{}, err
	}
	ts := strconv.FormatInt(cfg.at.Unix(), 10)
	secret := signingSecret
	if cfg.badSig {
		secret += "-forged"
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", Sign(secret, ts, body))
	if cfg.retryNum > 0 {
		req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(cfg.retryNum))
		req.Header.Set("X-Slack-Retry-Reason", cfg.retryReason)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Delivery{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Delivery{}, err
	}
	return Delivery{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Sign is Slack's v0 request signature of body at timestamp ts (Unix
// seconds), the value of X-Slack-Signature.
func Sign(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:", ts)
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

func (s *Server) deliveryBody(payload any) ([]byte, string, error) {
	switch p := payload.(type) {
	case url.Values:
		return []byte(p.Encode()), "application/x-www-form-urlencoded", nil
	case slack.SlashCommand:
		return []byte(commandForm(p).Encode()), "application/x-www-form-urlencoded", nil
	case Interaction:
		raw, err := marshalInteraction(p.Payload)
		if err != nil {
			return nil, "", err
		}
		return []byte(url.Values{"payload": {string(raw)}}.Encode()), "application/x-www-form-urlencoded", nil
	}
	body, err := s.eventPayload(payload)
	return body, "application/json", err
}

// commandForm is a slash command as Slack posts it to the command's URL.
func commandForm(c slack.SlashCommand) url.Values {
	v := url.Values{
		"token": {c.Token}, "team_id": {c.TeamID}, "team_domain": {c.TeamDomain},
		"channel_id": {c.ChannelID}, "channel_name": {c.ChannelName}, "user_id": {c.UserID},
		"user_name": {c.UserName}, "command": {c.Command}, "text": {c.Text},
		"api_app_id": {c.APIAppID}, "is_enterprise_install": {strconv.FormatBool(c.IsEnterpriseInstall)},
		"response_url": {c.ResponseURL}, "trigger_id": {c.TriggerID},
	}
	if c.EnterpriseID != "" {
		v.Set("enterprise_id", c.EnterpriseID)
		v.Set("enterprise_name", c.EnterpriseName)
	}
	return v
}

// VerifyURL does what Slack does when an Events API request URL is set:
// it posts a signed url_verification challenge and checks that the answer
// is 200 with the challenge (as text, JSON {"challenge":…} or a form).
func (s *Server) VerifyURL(ctx context.Context, endpoint, signingSecret string) error {
	challenge := randomID("", 48)
	body, _ := json.Marshal(object{"token": s.verificationToken, "challenge": challenge, "type": "url_verification"})
	d, err := s.DeliverHTTP(ctx, endpoint, json.RawMessage(body), signingSecret)
	if err != nil {
		return err
	}
	if d.Status != http.StatusOK {
		return fmt.Errorf("url_verification: HTTP %d: %.200s", d.Status, d.Body)
	}
	got := strings.TrimSpace(string(d.Body))
	var j struct {
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(d.Body, &j) == nil && j.Challenge != "" {
		got = j.Challenge
	} else if f, err := url.ParseQuery(got); err == nil && f.Get("challenge") != "" {
		got = f.Get("challenge")
	}
	if got != challenge {
		return fmt.Errorf("url_verification: the answer %.200q is not the challenge", d.Body)
	}
	return nil
}
