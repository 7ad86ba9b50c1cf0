package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDoctorRedactsURLCredentials puts credentials in every URL setting
// (a user and password, one with '@' in it; secret parameters in upper
// case, percent-encoded, repeated; a fragment) and checks that doctor -v
// shows none of them, in the effective configuration or in the failures
// of the checks that use the URLs, while it still names each host.
func TestDoctorRedactsURLCredentials(t *testing.T) {
	llm, slackAddr, tgAddr, hook, search := deadAddr(t), deadAddr(t), deadAddr(t), deadAddr(t), deadAddr(t)
	env := []string{
		"FIRSTMATE_DATA_DIR=" + t.TempDir(),
		"FIRSTMATE_MODEL=m",
		"OPENAI_BASE_URL=http://llm-user:LEAK-p@ss@" + llm + "/v1?KEY=LEAK-llm-key&api_key=LEAK-2",
		"FIRSTMATE_SEARCH_URL=http://search-user:LEAK-search-pw@" + search + "/?%6Bey=LEAK-search-key&key=LEAK-3#access_token=LEAK-4",
		"SLACK_API_URL=http://slack-user:LEAK-slack-pw@" + slackAddr + "/api/?token=LEAK-slack&Signature=LEAK-sig",
		"SLACK_BOT_TOKEN=xoxb-1-2-3",
		"SLACK_APP_TOKEN=xapp-1-2-3",
		"TELEGRAM_API_URL=http://tg-user:LEAK-tg-pw@" + tgAddr + "/?sig=LEAK-tg-sig",
		"TELEGRAM_BOT_TOKEN=123:abc",
		"TELEGRAM_WEBHOOK_URL=https://" + hook + "/telegram/webhook?secret=LEAK-hook&password=LEAK-5",
		"TELEGRAM_WEBHOOK_SECRET=s3cret",
		"REDIS_URL=redis://default:LEAK-redis-pw@" + deadAddr(t) + "/0?Token=LEAK-6",
	}
	out, errOut, code := runBinary(t, env, "", "doctor", "-v")
	if code != 1 {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "LEAK") {
		t.Errorf("doctor -v shows a secret:\n%s\n%s", out, errOut)
	}
	for _, want := range []string{
		"base_url: http://llm-user:xxxxx@" + llm + "/v1?KEY=xxxxx&api_key=xxxxx # from OPENAI_BASE_URL",
		"url: http://search-user:xxxxx@" + search + "/?%6Bey=xxxxx&key=xxxxx#access_token=xxxxx # from FIRSTMATE_SEARCH_URL",
		"api_url: http://slack-user:xxxxx@" + slackAddr + "/api/?token=xxxxx&Signature=xxxxx # from SLACK_API_URL",
		"api_url: http://tg-user:xxxxx@" + tgAddr + "/?sig=xxxxx # from TELEGRAM_API_URL",
		"webhook_url: https://" + hook + "/telegram/webhook?secret=xxxxx&password=xxxxx # from TELEGRAM_WEBHOOK_URL",
		// A URL with a password is the config's one failure; the model's
		// check waits for it.
		"FAIL  config     OPENAI_BASE_URL: \"http://llm-user:xxxxx@" + llm + "/v1?KEY=xxxxx&api_key=xxxxx\" holds a user or password",
		"skip  llm",
		"FAIL  slack",
		"FAIL  telegram",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor -v lacks %q:\n%s", want, out)
		}
	}
}

// TestModelErrorsRedactURLCredentials: a model server that redirects to a
// URL with a key fails the call; neither doctor nor chat's log shows the
// key, and both still name the host.
func TestModelErrorsRedactURLCredentials(t *testing.T) {
	dead := deadAddr(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+dead+r.URL.Path+"?key=LEAK-key&Access_Token=LEAK-tok&%6Bey=LEAK-3", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	env := []string{
		"FIRSTMATE_DATA_DIR=" + t.TempDir(),
		"FIRSTMATE_MODEL=m",
		"OPENAI_BASE_URL=" + redirect.URL + "/v1",
		"FIRSTMATE_LOG_LEVEL=debug",
	}
	out, errOut, _ := runBinary(t, env, "", "doctor")
	if strings.Contains(out+errOut, "LEAK") || !strings.Contains(out, "FAIL  llm") || !strings.Contains(out, dead) {
		t.Errorf("doctor:\n%s\n%s", out, errOut)
	}
	out, errOut, _ = runBinary(t, env, "hi\n", "chat")
	if strings.Contains(out+errOut, "LEAK") || !strings.Contains(errOut, dead) {
		t.Errorf("chat:\n%s\n%s", out, errOut)
	}
}
