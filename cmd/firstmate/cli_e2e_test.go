package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/internal/testkit/faketelegram"
	"github.com/firstmate/firstmate/store/local"
)

// The command line (flags anywhere, help, -v, the default config file),
// chat's ways with a half-set platform, a busy data dir and a pipe, the
// start-up line, JSON logs to the last line, and doctor.

// toolCaller is a model that calls the tool when it is offered one
// (doctor's check) and otherwise answers "hello".
func toolCaller(req *fakellm.Request) fakellm.Reply {
	if len(req.Tools) == 1 && req.LastMessage().Role == "user" {
		return fakellm.Calls(fakellm.Call(req.Tools[0].Function.Name, `{"status":"ok"}`))
	}
	return fakellm.Text("hello")
}

// runCmd runs firstmate's run in this process: for what starts nothing.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func TestHelpOnEverySubcommand(t *testing.T) {
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"help"},
		{"chat", "-h"}, {"chat", "--help"}, {"help", "chat"},
		{"serve", "-h"}, {"serve", "--help"},
		{"doctor", "-h"}, {"doctor", "--help"},
		{"version", "-h"}, {"version", "--help"},
		{"--config", "nowhere.yaml", "chat", "-h"},
	} {
		out, errOut, code := runCmd(t, args...)
		if code != 0 || !strings.Contains(out, "config") || !strings.Contains(out, "-v") || !strings.Contains(out, "verbose") {
			t.Errorf("firstmate %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"admin", "-h"}, {"admin", "--help"}, {"admin", "policy", "show", "--help"}} {
		out, errOut, code := runCmd(t, args...)
		if code != 0 || !strings.Contains(out, "--config FILE") || !strings.Contains(out, "-v (--verbose)") {
			t.Errorf("firstmate %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
	}
	// admin's flags go before its command's words too.
	for _, args := range [][]string{
		{"--config", "missing.yaml", "admin", "pair", "list"},
		{"admin", "--config", "missing.yaml", "pair", "list"},
		{"admin", "pair", "list", "--config", "missing.yaml"},
	} {
		_, errOut, code := runCmd(t, args...)
		if code != 1 || !strings.Contains(errOut, "missing.yaml") {
			t.Errorf("firstmate %q: exit %d, stderr %q", args, code, errOut)
		}
	}
	out, _, _ := runCmd(t, "doctor", "-h")
	if !strings.Contains(out, "-offline") {
		t.Errorf("doctor's help lacks --offline:\n%s", out)
	}
	// A wrong command line still exits 2 and says how to get help.
	for _, args := range [][]string{{"chat", "--frobnicate"}, {"chat", "extra"}, {"--frobnicate", "chat"}} {
		_, errOut, code := runCmd(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("firstmate %q: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestVerboseIsVerbose: -v means --verbose everywhere; the version is a
// command (and --version, still).
func TestVerboseIsVerbose(t *testing.T) {
	_, errOut, code := runCmd(t, "-v")
	if code != 2 || !strings.Contains(errOut, "-v is --verbose") {
		t.Fatalf("firstmate -v: exit %d\n%s", code, errOut)
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v", "version"}} {
		out, _, code := runCmd(t, args...)
		if code != 0 || !strings.HasPrefix(out, "firstmate ") {
			t.Errorf("firstmate %q: exit %d %q", args, code, out)
		}
	}
	// chat keeps to warnings; -v, before or after the command, lowers
	// the level (to debug), so the start-up line shows.
	llm := fakellm.New(t, fakellm.WithHandler(toolCaller))
	for _, args := range [][]string{{"chat"}, {"-v", "chat"}, {"chat", "--verbose"}} {
		_, errOut, code := runBinary(t, chatEnv(t, llm, t.TempDir()), "hi\n", args...)
		verbose := len(args) > 1
		if code != 0 || strings.Contains(errOut, `msg="firstmate starting"`) != verbose || strings.Contains(errOut, "level=INFO") != verbose {
			t.Errorf("firstmate %q: exit %d, stderr:\n%s", args, code, errOut)
		}
	}
}

// TestGlobalFlagsAnywhere: --config before or after the command; after it
// wins over before.
func TestGlobalFlagsAnywhere(t *testing.T) {
	llm := fakellm.New(t, fakellm.WithModels("fake-model", "from-file"), fakellm.WithHandler(toolCaller))
	good := writeFile(t, "llm:\n  base_url: "+llm.URL()+"\n  model: from-file\n")
	bad := filepath.Join(t.TempDir(), "missing.yaml")
	env := []string{"FIRSTMATE_DATA_DIR=" + t.TempDir()}
	for _, args := range [][]string{
		{"--config", good, "chat"},
		{"chat", "--config", good},
		{"--config=" + good, "chat"},
		{"--config", bad, "chat", "--config", good},
	} {
		before := len(llm.Requests())
		out, errOut, code := runBinary(t, env, "hi\n", args...)
		if code != 0 || !strings.Contains(out, "hello") {
			t.Errorf("firstmate %q: exit %d\n%s\n%s", args, code, out, errOut)
			continue
		}
		if reqs := llm.Requests(); len(reqs) != before+1 || reqs[before].Model != "from-file" {
			t.Errorf("firstmate %q: the model was not the file's: %d requests, before %d", args, len(reqs), before)
		}
	}
	for _, args := range [][]string{{"--config", good, "doctor", "--offline"}, {"doctor", "--offline", "--config", good}} {
		out, _, code := runBinary(t, env, "", args...)
		if code != 0 || !strings.Contains(out, "ok    config     file "+good+" (--config)") {
			t.Errorf("firstmate %q: exit %d\n%s", args, code, out)
		}
	}
	_, errOut, code := runBinary(t, env, "", "chat", "--config", bad)
	if code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("a missing --config file: exit %d\n%s", code, errOut)
	}
}

// TestDefaultConfigFile: $FIRSTMATE_CONFIG, ./firstmate.yaml,
// $XDG_CONFIG_HOME/firstmate/config.yaml (~/.config without it), in that
// order; none is fine. doctor shows which, and the start-up line says it.
func TestDefaultConfigFile(t *testing.T) {
	llm := fakellm.New(t, fakellm.WithModels("named", "cwd", "xdg", "home"), fakellm.WithHandler(toolCaller))
	config := func(path, model string) string {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("llm:\n  model: "+model+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	home, cwd, xdg := t.TempDir(), t.TempDir(), t.TempDir()
	homeFile := config(filepath.Join(home, ".config", "firstmate", "config.yaml"), "home")
	xdgFile := config(filepath.Join(xdg, "firstmate", "config.yaml"), "xdg")
	cwdFile := config(filepath.Join(cwd, "firstmate.yaml"), "cwd")
	named := config(filepath.Join(t.TempDir(), "named.yaml"), "named")
	base := []string{"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_DATA_DIR=" + t.TempDir()}
	// runIn runs doctor --offline in dir with HOME=home, and checks the
	// file it names and the model a chat there uses.
	runIn := func(dir string, env []string, wantFile, wantModel string) {
		t.Helper()
		in := func(c *exec.Cmd) { c.Dir = dir }
		env = append(env, "HOME="+home) // after runBinary's HOME: it wins
		out, _, code := runBinaryWith(t, append(base, env...), "", in, "doctor", "--offline")
		want := "ok    config     file " + wantFile
		if wantFile == "" {
			want = "ok    config     no file"
		}
		if code != 0 && wantFile != "" || !strings.Contains(out, want) {
			t.Errorf("in %s with %q: exit %d, want %q:\n%s", dir, env, code, want, out)
		}
		if wantModel == "" {
			return
		}
		_, errOut, code := runBinaryWith(t, append(base, env...), "hi\n", in, "chat", "-v")
		if code != 0 || !strings.Contains(errOut, `msg="firstmate starting"`) || !strings.Contains(errOut, "model="+wantModel) ||
			!strings.Contains(errOut, "config="+wantFile) {
			t.Errorf("chat in %s with %q: exit %d, want model %s from %s:\n%s", dir, env, code, wantModel, wantFile, errOut)
		}
	}
	runIn(cwd, []string{"FIRSTMATE_CONFIG=" + named, "XDG_CONFIG_HOME=" + xdg}, named, "named")
	runIn(cwd, []string{"XDG_CONFIG_HOME=" + xdg}, cwdFile, "cwd")
	runIn(t.TempDir(), []string{"XDG_CONFIG_HOME=" + xdg}, xdgFile, "xdg")
	runIn(t.TempDir(), nil, homeFile, "home")
	os.Remove(homeFile)
	// None: the environment alone.
	runIn(t.TempDir(), []string{"FIRSTMATE_MODEL=fake-model"}, "", "")
}

// TestChatIgnoresHalfSetPlatforms: a Slack bot token without an app token
// or signing secret stops serve, but chat only warns.
func TestChatIgnoresHalfSetPlatforms(t *testing.T) {
	llm := fakellm.New(t, fakellm.WithHandler(toolCaller))
	env := append(chatEnv(t, llm, t.TempDir()), "SLACK_BOT_TOKEN=xoxb-1-2-3", "TELEGRAM_ALLOWED_USERS=not-a-number")
	out, errOut, code := runBinary(t, env, "hi\n", "chat")
	if code != 0 || !strings.Contains(out, "hello") {
		t.Fatalf("chat: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"level=WARN", "SLACK_APP_TOKEN", "chat does not use slack", "TELEGRAM_ALLOWED_USERS", "chat does not use telegram"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("chat's warnings lack %q:\n%s", want, errOut)
		}
	}
	_, errOut, code = runBinary(t, env, "", "serve")
	if code != 1 || !strings.Contains(errOut, "SLACK_APP_TOKEN") {
		t.Errorf("serve: exit %d\n%s", code, errOut)
	}
	// A problem outside the platforms still stops chat.
	_, errOut, code = runBinary(t, append(env, "FIRSTMATE_LOG_LEVEL=loud"), "hi\n", "chat")
	if code != 1 || !strings.Contains(errOut, "FIRSTMATE_LOG_LEVEL") {
		t.Errorf("chat with a bad log level: exit %d\n%s", code, errOut)
	}
}

// TestPipedChatEchoesAndFails: piped input is echoed before each answer,
// and a turn that failed makes the exit status 1.
func TestPipedChatEchoesAndFails(t *testing.T) {
	llm := fakellm.New(t, fakellm.WithHandler(func(req *fakellm.Request) fakellm.Reply {
		if req.LastMessage().Text() == "fail" {
			return fakellm.Error(400, "bad request")
		}
		return fakellm.Text("answer to " + req.LastMessage().Text())
	}))
	env := chatEnv(t, llm, t.TempDir())
	out, errOut, code := runBinary(t, env, "one\ntwo\n", "chat")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if want := "> one\nanswer to one\n> two\nanswer to two\n"; out != want {
		t.Errorf("transcript %q, want %q", out, want)
	}
	out, errOut, code = runBinary(t, env, "one\nfail\nthree\n", "chat")
	if code != 1 || !strings.Contains(errOut, "1 message(s) got no answer") {
		t.Fatalf("a failed turn: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "> fail\nThe model endpoint rejected the request") || !strings.Contains(out, "> three\nanswer to three") {
		t.Errorf("transcript:\n%s", out)
	}
}

// jsonLines checks that every line of s is a JSON object and returns them.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not a JSON line: %q", line)
			continue
		}
		out = append(out, m)
	}
	return out
}

// TestJSONLogsToTheLastLine: with log.format json the error firstmate
// exits with is a JSON line too.
func TestJSONLogsToTheLastLine(t *testing.T) {
	for name, env := range map[string][]string{
		"environment":            {"FIRSTMATE_LOG_FORMAT=json"},
		"file":                   {"FIRSTMATE_CONFIG=" + writeFile(t, "log:\n  format: json\n")},
		"file with another flaw": {"FIRSTMATE_CONFIG=" + writeFile(t, "log:\n  format: json\nagent:\n  max_steps: 0\n")},
	} {
		t.Run(name, func(t *testing.T) {
			env := append(env, "FIRSTMATE_DATA_DIR="+t.TempDir())
			for _, cmd := range []string{"chat", "serve"} {
				_, errOut, code := runBinary(t, env, "hi\n", cmd)
				lines := jsonLines(t, errOut)
				if code != 1 || len(lines) == 0 {
					t.Fatalf("%s: exit %d\n%s", cmd, code, errOut)
				}
				last := lines[len(lines)-1]
				if last["level"] != "ERROR" || last["command"] != cmd || last["err"] == "" {
					t.Errorf("%s: last line %v", cmd, last)
				}
			}
		})
	}
	// A chat whose turn failed ends with a JSON line as well.
	llm := fakellm.New(t, fakellm.WithHandler(func(*fakellm.Request) fakellm.Reply { return fakellm.Error(400, "no") }))
	_, errOut, code := runBinary(t, append(chatEnv(t, llm, t.TempDir()), "FIRSTMATE_LOG_FORMAT=json"), "hi\n", "chat")
	if lines := jsonLines(t, errOut); code != 1 || len(lines) == 0 || lines[len(lines)-1]["level"] != "ERROR" {
		t.Errorf("exit %d\n%s", code, errOut)
	}
}

// TestServeStartLineAndChatBeside: serve's start-up line names the
// version, the model, the store and the platforms (in JSON, as every line);
// a chat on the data dir serve holds says what to do instead of failing
// obscurely, and works once given a dir of its own.
func TestServeStartLineAndChatBeside(t *testing.T) {
	tg := faketelegram.New(t)
	llm := fakellm.New(t, fakellm.WithHandler(toolCaller))
	data := t.TempDir()
	env := []string{
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + data,
		"TELEGRAM_BOT_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL(), "TELEGRAM_ACCESS=open",
		"FIRSTMATE_HTTP_ADDR=" + deadAddr(t), "FIRSTMATE_LOG_FORMAT=json",
	}
	srv := startServe(t, env)
	if !tg.WaitFor(20*time.Second, func() bool { return tg.Polling() > 0 }) {
		t.Fatalf("serve does not poll\n%s", srv.logs())
	}
	var start map[string]any
	for _, l := range jsonLines(t, srv.logs()) {
		if l["msg"] == "firstmate starting" {
			start = l
		}
	}
	// The binary's version is what it says itself: Go stamps a build inside
	// a git checkout with the commit (unless -buildvcs=false), the test
	// binary never.
	out, _, code := runBinary(t, nil, "", "version")
	if code != 0 {
		t.Fatalf("version: exit %d %q", code, out)
	}
	want := map[string]any{"version": strings.TrimPrefix(strings.TrimSpace(out), "firstmate "), "command": "serve", "model": "fake-model",
		"store": "embedded " + filepath.Join(data, "firstmate.db"), "platforms": "telegram (long polling)"}
	for k, v := range want {
		if start[k] != v {
			t.Errorf("start-up line: %s = %v, want %v (%v)", k, start[k], v, start)
		}
	}

	_, errOut, code := runBinary(t, env, "hi\n", "chat")
	if code != 1 {
		t.Fatalf("chat beside serve: exit %d\n%s", code, errOut)
	}
	lines := jsonLines(t, errOut)
	msg, _ := lines[len(lines)-1]["err"].(string)
	for _, want := range []string{"the data dir " + data + " is in use", "firstmate serve", "stop that firstmate", "REDIS_URL", "FIRSTMATE_DATA_DIR=" + data + "-chat firstmate chat"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
	env[2] = "FIRSTMATE_DATA_DIR=" + t.TempDir()
	if out, errOut, code := runBinary(t, env, "hi\n", "chat"); code != 0 || !strings.Contains(out, "hello") {
		t.Errorf("chat with a data dir of its own: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestDoctorModel: a model the server does not have is a failure; doctor
// asks the model for a tool call with one tool; --offline asks nothing.
func TestDoctorModel(t *testing.T) {
	doctor := func(t *testing.T, llm *fakellm.Server, model string, args ...string) (string, int) {
		t.Helper()
		env := []string{"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=" + model, "FIRSTMATE_DATA_DIR=" + t.TempDir()}
		out, _, code := runBinary(t, env, "", append([]string{"doctor"}, args...)...)
		return out, code
	}
	t.Run("answers a tool call", func(t *testing.T) {
		llm := fakellm.New(t, fakellm.WithHandler(toolCaller))
		out, code := doctor(t, llm, "fake-model")
		if code != 0 || !strings.Contains(out, "ok    llm        model fake-model answers a tool call (native tool calls)") {
			t.Fatalf("exit %d\n%s", code, out)
		}
		reqs := llm.Requests()
		if len(reqs) != 1 || len(reqs[0].Tools) != 1 {
			t.Fatalf("doctor sent %d requests, the first with %d tools; want 1 with 1", len(reqs), len(reqs[0].Tools))
		}
	})
	t.Run("not listed", func(t *testing.T) {
		llm := fakellm.New(t, fakellm.WithModels("llama3.1", "qwen3"), fakellm.WithHandler(toolCaller))
		out, code := doctor(t, llm, "llama3")
		if code != 1 || !strings.Contains(out, `FAIL  llm        `+llm.URL()+` has no model "llama3"; it has llama3.1, qwen3`) {
			t.Fatalf("exit %d\n%s", code, out)
		}
		if n := len(llm.Requests()); n != 0 {
			t.Errorf("%d chat requests after the model was not found", n)
		}
	})
	t.Run("listed but missing", func(t *testing.T) {
		llm := fakellm.New(t, fakellm.WithHandler(func(*fakellm.Request) fakellm.Reply {
			return fakellm.Error(404, "The model `fake-model` does not exist or you do not have access to it.")
		}))
		out, code := doctor(t, llm, "fake-model")
		if code != 1 || failLines(out) != 1 || !strings.Contains(out, "FAIL  llm") || !strings.Contains(out, "does not exist") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("no tool call", func(t *testing.T) {
		llm := fakellm.New(t, fakellm.WithHandler(func(*fakellm.Request) fakellm.Reply { return fakellm.Text("I am fine.") }))
		out, code := doctor(t, llm, "fake-model")
		if code != 0 || !strings.Contains(out, "warn  llm        model fake-model answered, but did not call the tool") ||
			!strings.Contains(out, "llm.tool_protocol: text") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		env := []string{"OPENAI_BASE_URL=http://" + deadAddr(t) + "/v1", "FIRSTMATE_MODEL=m", "FIRSTMATE_DATA_DIR=" + t.TempDir()}
		out, _, code := runBinary(t, env, "", "doctor")
		if code != 1 || failLines(out) != 1 || !strings.Contains(out, "connection refused") ||
			!strings.Contains(out, "Is the model server running?") || !strings.Contains(out, "http://localhost:11434/v1") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
	t.Run("offline", func(t *testing.T) {
		llm := fakellm.New(t, fakellm.WithHandler(toolCaller))
		env := []string{"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + t.TempDir(),
			"REDIS_URL=redis://" + deadAddr(t) + "/0",
			"TELEGRAM_BOT_TOKEN=123:abc", "TELEGRAM_API_URL=http://" + deadAddr(t),
			"SLACK_BOT_TOKEN=xoxb-1", "SLACK_APP_TOKEN=xapp-1", "SLACK_API_URL=http://" + deadAddr(t) + "/api/"}
		out, _, code := runBinary(t, env, "", "doctor", "--offline")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		for _, what := range []string{"store", "llm", "telegram", "slack"} {
			if !strings.Contains(out, fmt.Sprintf("skip  %-10s not checked (--offline)", what)) {
				t.Errorf("%s is not skipped:\n%s", what, out)
			}
		}
		if n := len(llm.Requests()); n != 0 {
			t.Errorf("--offline sent %d requests to the model", n)
		}
	})
}

// TestDoctorOneFailurePerBadURL: a URL that is wrong in the configuration
// is one FAIL line; the check that would use it is skipped.
func TestDoctorOneFailurePerBadURL(t *testing.T) {
	llm := fakellm.New(t, fakellm.WithHandler(toolCaller))
	base := []string{"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model"}
	for _, tc := range []struct {
		env  []string
		skip string
	}{
		{[]string{"OPENAI_BASE_URL=localhost:11434"}, "llm"},
		{[]string{"REDIS_URL=http://localhost:6379"}, "store"},
		{[]string{"SLACK_BOT_TOKEN=xoxb-1", "SLACK_APP_TOKEN=xapp-1", "SLACK_API_URL=slack.example.com/api"}, "slack"},
		{[]string{"TELEGRAM_BOT_TOKEN=123:abc", "TELEGRAM_API_URL=ftp://tg.example.com"}, "telegram"},
		{[]string{"SLACK_BOT_TOKEN=xoxb-1"}, "slack"}, // half set
	} {
		env := append(append(append([]string(nil), base...), tc.env...), "FIRSTMATE_DATA_DIR="+t.TempDir())
		out, _, code := runBinary(t, env, "", "doctor")
		if code != 1 || failLines(out) != 1 || !strings.Contains(out, "FAIL  config") ||
			!strings.Contains(out, fmt.Sprintf("skip  %-10s not checked until", tc.skip)) {
			t.Errorf("%q: exit %d\n%s", tc.env, code, out)
		}
	}
}

// TestDoctorChangesNothing: doctor creates neither the data dir nor the
// database, writes no file, and reads a store in use without waiting for it.
func TestDoctorChangesNothing(t *testing.T) {
	llm := fakellm.New(t, fakellm.WithHandler(toolCaller))
	data := filepath.Join(t.TempDir(), "data")
	env := chatEnv(t, llm, data)
	out, _, code := runBinary(t, env, "", "doctor")
	if code != 0 || !strings.Contains(out, "not there yet: firstmate creates it when it starts") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("doctor created the data dir: %v", err)
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, code := runBinary(t, env, "", "doctor"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Fatalf("doctor wrote into the empty data dir: %v", entries)
	}
	// A store that exists: read, not changed; in use: said so.
	db := filepath.Join(data, "firstmate.db")
	st, err := local.Open(db, agent.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	out, _, code = runBinary(t, env, "", "doctor", "--offline")
	if code != 0 || !strings.Contains(out, "ok    store      embedded "+db+" is open in a running firstmate") {
		t.Errorf("a store in use: exit %d\n%s", code, out)
	}
	st.Close()
	before, _ := os.Stat(db)
	out, _, code = runBinary(t, env, "", "doctor", "--offline")
	after, _ := os.Stat(db)
	if code != 0 || !strings.Contains(out, "ok    store      embedded "+db+"\n") {
		t.Errorf("a store: exit %d\n%s", code, out)
	}
	if !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Errorf("doctor changed the store")
	}
	if entries, _ := os.ReadDir(data); len(entries) != 1 {
		t.Errorf("doctor left files in the data dir: %v", entries)
	}
	// A data dir it could not create is a failure.
	ro := t.TempDir()
	os.Chmod(ro, 0o500)
	defer os.Chmod(ro, 0o700)
	if os.Geteuid() != 0 {
		out, _, code = runBinary(t, chatEnv(t, llm, filepath.Join(ro, "data")), "", "doctor", "--offline")
		if code != 1 || !strings.Contains(out, "FAIL  data dir") {
			t.Errorf("an unwritable parent: exit %d\n%s", code, out)
		}
	}
}

// failLines counts doctor's FAIL lines.
func failLines(out string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "FAIL ") {
			n++
		}
	}
	return n
}
