package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// urlEnv puts credentials in every URL setting, in every form: a user and
// password (one with '@' in it), secret query parameters (upper case,
// percent-encoded names, repeated) and a fragment. Every secret holds
// LEAK; every host is named after its setting, to show it stays.
var urlEnv = env{
	"OPENAI_BASE_URL":      "https://llm-user:LEAK-p@ss@llm.example/v1?KEY=LEAK-llm-key&api_key=LEAK-2",
	"FIRSTMATE_SEARCH_URL": "https://search-user:LEAK-search-pw@search.example/?%6Bey=LEAK-search-key&key=LEAK-3&format=json#access_token=LEAK-4",
	"SLACK_API_URL":        "https://slack.example/api/?token=LEAK-slack&Signature=LEAK-sig",
	"TELEGRAM_API_URL":     "https://tg-user:LEAK-tg-pw@telegram.example/?sig=LEAK-tg-sig",
	"TELEGRAM_WEBHOOK_URL": "https://hook.example/telegram/webhook?secret=LEAK-hook&client_secret=LEAK-5&password=LEAK-6",
	"REDIS_URL":            "rediss://default:LEAK-redis-pw@redis.example:6380/0",
	"FIRSTMATE_MODEL":      "m",
}

func TestRedactedHidesURLCredentials(t *testing.T) {
	// The base URL's password is a problem Load reports; the others load.
	c, err := Load("", urlEnv.withHome().lookup)
	if c == nil {
		t.Fatalf("Load: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "LEAK") {
		t.Errorf("Load's problems show a secret:\n%v", err)
	}
	for _, w := range c.Warnings() {
		if strings.Contains(w, "LEAK") {
			t.Errorf("a warning shows a secret: %s", w)
		}
	}
	out := c.Redacted()
	if strings.Contains(out, "LEAK") {
		t.Errorf("Redacted() shows a secret:\n%s", out)
	}
	for _, want := range []string{
		"base_url: https://llm-user:xxxxx@llm.example/v1?KEY=xxxxx&api_key=xxxxx # from OPENAI_BASE_URL",
		"url: https://search-user:xxxxx@search.example/?%6Bey=xxxxx&key=xxxxx&format=json#access_token=xxxxx # from FIRSTMATE_SEARCH_URL",
		"api_url: https://slack.example/api/?token=xxxxx&Signature=xxxxx # from SLACK_API_URL",
		"api_url: https://tg-user:xxxxx@telegram.example/?sig=xxxxx # from TELEGRAM_API_URL",
		"webhook_url: https://hook.example/telegram/webhook?secret=xxxxx&client_secret=xxxxx&password=xxxxx # from TELEGRAM_WEBHOOK_URL",
		"redis_url: rediss://default:xxxxx@redis.example:6380/0 # from REDIS_URL",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Redacted() lacks %q:\n%s", want, out)
		}
	}
}

// TestRedactedCoversEveryURLSetting sets every string setting whose key
// ends in url, found by walking the struct, so that a URL setting added
// later is checked without being listed here.
func TestRedactedCoversEveryURLSetting(t *testing.T) {
	c := Default()
	var keys []string
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			key := strings.TrimPrefix(path+"."+name, ".")
			fv := v.Field(i)
			switch {
			case fv.Kind() == reflect.Struct:
				walk(fv, key)
			case fv.Kind() == reflect.String && strings.HasSuffix(name, "url"):
				host := strings.NewReplacer(".", "-", "_", "-").Replace(key) + ".example"
				fv.SetString(fmt.Sprintf("https://u:LEAK-pw@%s/?token=LEAK-tok", host))
				keys = append(keys, key)
			}
		}
	}
	walk(reflect.ValueOf(c).Elem(), "")
	if len(keys) < 5 {
		t.Fatalf("found only %q", keys)
	}
	out := c.Redacted()
	if strings.Contains(out, "LEAK") {
		t.Errorf("Redacted() shows a secret:\n%s", out)
	}
	for _, key := range keys {
		host := strings.NewReplacer(".", "-", "_", "-").Replace(key) + ".example"
		if key == "store.redis_url" {
			continue // not an http URL; redisurl masks what it can tell apart
		}
		if want := "https://u:xxxxx@" + host + "/?token=xxxxx"; !strings.Contains(out, want) {
			t.Errorf("%s: Redacted() lacks %q:\n%s", key, want, out)
		}
	}
}
