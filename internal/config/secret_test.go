package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Verbs that vet would flag as wrong for the type: a variable so that the
// test can check what they print anyway.
var verbD, verbS = "%d", "%s"

func TestSecret(t *testing.T) {
	s := Secret("sk-abc")
	for name, got := range map[string]string{
		"String":   s.String(),
		"GoString": s.GoString(),
		"%v":       fmt.Sprintf("%v", s),
		"%s":       fmt.Sprintf("%s", s),
		"%q":       fmt.Sprintf("%q", s),
		"%d":       fmt.Sprintf(verbD, s),
		"%x":       fmt.Sprintf("%x", s),
		"%#v":      fmt.Sprintf("%#v", s),
		"LogValue": s.LogValue().String(),
	} {
		if strings.Contains(got, "sk-abc") || strings.Contains(got, fmt.Sprintf("%x", "sk-abc")) {
			t.Errorf("%s shows the secret: %q", name, got)
		}
	}
	if s.String() != "[redacted]" || s.Reveal() != "sk-abc" {
		t.Errorf("String %q, Reveal %q", s.String(), s.Reveal())
	}
	var empty Secret
	if empty.String() != "" || fmt.Sprintf("%#v", empty) != `""` {
		t.Errorf("empty secret prints %q / %#v", empty.String(), empty)
	}
	b, _ := json.Marshal(struct{ A, B Secret }{s, empty})
	if string(b) != `{"A":"[redacted]","B":""}` {
		t.Errorf("json %s", b)
	}
	// Decoding is a plain string.
	var got struct{ A Secret }
	if err := json.Unmarshal([]byte(`{"A":"x"}`), &got); err != nil || got.A != "x" {
		t.Errorf("json decode %q %v", got.A, err)
	}
	if err := yaml.Unmarshal([]byte("a: y\n"), &got); err != nil || got.A != "y" {
		t.Errorf("yaml decode %q %v", got.A, err)
	}
}

// secretEnv sets every secret, and the Redis password, to a value that
// would stand out in any output.
var secretEnv = env{
	"OPENAI_API_KEY":       "sk-LEAK-openai-key",
	"REDIS_URL":            "rediss://default:LEAK-redis-pw@redis.internal:6380/0",
	"SLACK_BOT_TOKEN":      "xoxb-LEAK-bot",
	"SLACK_APP_TOKEN":      "xapp-LEAK-app",
	"SLACK_SIGNING_SECRET": "LEAK-signing",
	"TELEGRAM_BOT_TOKEN":   "123:LEAK-telegram",
	"FIRSTMATE_MODEL":      "m",
	"HOME":                 "/home/mate",
}

func TestSecretsNeverPrinted(t *testing.T) {
	c := mustLoad(t, "", secretEnv)
	if len(c.Secrets()) != 7 { // six secrets and the Redis password
		t.Fatalf("Secrets() = %d values, want 7", len(c.Secrets()))
	}
	outputs := map[string]string{
		"%v":        fmt.Sprintf("%v", c),
		"%+v":       fmt.Sprintf("%+v", c),
		"%#v":       fmt.Sprintf("%#v", c),
		"%v value":  fmt.Sprintf("%v", *c),
		"%+v value": fmt.Sprintf("%+v", *c),
		"%#v value": fmt.Sprintf("%#v", *c),
		"%s":        fmt.Sprintf(verbS, *c),
		"Redacted":  c.Redacted(),
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs["json"] = string(b)
	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs["yaml"] = string(y)
	for _, h := range []struct {
		name string
		new  func(*bytes.Buffer) slog.Handler
	}{
		{"slog text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
		{"slog json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
	} {
		var buf bytes.Buffer
		log := slog.New(h.new(&buf))
		log.Info("config", "config", c, "value", *c, "llm", c.LLM, "key", c.LLM.APIKey, "slack", c.Slack)
		log.Info("group", slog.Group("g", "store", c.Store, "token", c.Telegram.BotToken))
		outputs[h.name] = buf.String()
	}
	for name, out := range outputs {
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("%s: no [redacted] in %s", name, out)
		}
		if strings.Contains(out, "LEAK") {
			t.Errorf("%s leaks a secret:\n%s", name, out)
		}
	}
}

func TestProblemsDoNotLeak(t *testing.T) {
	bad := env{
		"OPENAI_API_KEY":       "sk LEAK with space",
		"OPENAI_BASE_URL":      "https://user:LEAK-pw@llm.example/v1",
		"REDIS_URL":            "http://:LEAK-redis@redis:6379",
		"SLACK_BOT_TOKEN":      "xoxp-LEAK-user",
		"SLACK_APP_TOKEN":      "LEAK-app",
		"SLACK_SIGNING_SECRET": "LEAK sign",
		"TELEGRAM_BOT_TOKEN":   "LEAK",
		"HOME":                 "/home/mate",
	}
	c, err := Load("", bad.lookup)
	if err == nil {
		t.Fatal("no problems")
	}
	if strings.Contains(err.Error(), "LEAK") {
		t.Errorf("problems leak a secret:\n%v", err)
	}
	for _, w := range c.Warnings() {
		if strings.Contains(w, "LEAK") {
			t.Errorf("warning leaks a secret: %s", w)
		}
	}
	// Nor are the Redis URL's other forms, or its sentinel password.
	for _, u := range []string{
		"redis://:LEAK-pw@a,b",
		"redis+cluster://:LEAK-pw@a,b/2",
		"redis+cluster://u:LEAK-pw@a:99999",
		"redis+sentinel://:LEAK-pw@a,b",
		"redis+sentinel://a,b/m?sentinel_password=LEAK-pw&bogus=1",
		"redis+sentinel://a,b/m?sentinel_password=LEAK-pw&sentinel_password=LEAK-2",
		"redis://a?password=LEAK-pw",
		"redis://:LEAK/pw@a",
	} {
		c, err := Load("", env{"REDIS_URL": u, "HOME": "/h"}.lookup)
		if err == nil || strings.Contains(err.Error(), "LEAK") {
			t.Errorf("bad Redis URL: %v", err)
		}
		if strings.Contains(c.Redacted(), "LEAK") {
			t.Errorf("Redacted shows a password of a bad Redis URL:\n%s", c.Redacted())
		}
	}
	// A Redis URL that does not parse is not quoted either.
	c, err = Load("", env{"REDIS_URL": "redis://:LEAK%zz@host", "HOME": "/h"}.lookup)
	if err == nil || strings.Contains(err.Error(), "LEAK") {
		t.Errorf("bad Redis URL: %v", err)
	}
	if strings.Contains(c.Redacted(), "LEAK") {
		t.Errorf("Redacted shows an unparsable Redis URL")
	}
	// Nor is a secret in the file.
	path := writeConfig(t, "slack:\n  bot_token: LEAK-in-file\n  app_token: xapp-1\n")
	if _, err := Load(path, env{"HOME": "/h"}.lookup); err == nil || strings.Contains(err.Error(), "LEAK") {
		t.Errorf("file: %v", err)
	}
}

func TestSecretsList(t *testing.T) {
	c := mustLoad(t, "", secretEnv)
	want := []string{
		"rediss://default:LEAK-redis-pw@redis.internal:6380/0",
		"sk-LEAK-openai-key",
		"123:LEAK-telegram",
		"LEAK-redis-pw",
		"xapp-LEAK-app",
		"xoxb-LEAK-bot",
		"LEAK-signing",
	}
	if got := c.Secrets(); !slices.Equal(got, want) {
		t.Errorf("Secrets() = %q\nwant %q", got, want)
	}
	// Repeats collapse; nothing set, nothing returned.
	c = Default()
	c.Slack.BotToken, c.Slack.AppToken = "same", "same"
	if got := c.Secrets(); !slices.Equal(got, []string{"same"}) {
		t.Errorf("Secrets() = %q", got)
	}
	if got := Default().Secrets(); len(got) != 0 {
		t.Errorf("Secrets() of the defaults = %q", got)
	}
	// The Redis URL's passwords: the user info's and the sentinels'.
	c = Default()
	c.Store.RedisURL = "rediss+sentinel://:LEAK-m@s1,s2/m?sentinel_password=LEAK-s"
	if got := c.Secrets(); !slices.Equal(got, []string{"rediss+sentinel://:LEAK-m@s1,s2/m?sentinel_password=LEAK-s", "LEAK-m", "LEAK-s"}) {
		t.Errorf("Secrets() = %q", got)
	}
	// A password in a URL that Validate would refuse is still a secret.
	c = Default()
	c.LLM.BaseURL = "https://u:pw-in-url@host/v1"
	if got := c.Secrets(); !slices.Equal(got, []string{"pw-in-url"}) {
		t.Errorf("Secrets() = %q", got)
	}
}
