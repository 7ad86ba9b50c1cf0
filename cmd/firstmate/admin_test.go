package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstmate/firstmate/adapters/console"
	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/agent/govern"
	"github.com/firstmate/firstmate/tools"
)

// adminEnv points firstmate at a fresh store, embedded or (backend
// "redis") on the test Redis under a key prefix of its own, with no LLM
// configured: admin must not need one.
func adminEnv(t *testing.T, backend string) {
	t.Helper()
	for _, k := range []string{"FIRSTMATE_CONFIG", "OPENAI_BASE_URL", "OPENAI_API_KEY", "FIRSTMATE_MODEL", "FIRSTMATE_ADMINS"} {
		t.Setenv(k, "")
	}
	t.Setenv("FIRSTMATE_DATA_DIR", t.TempDir())
	t.Setenv("USER", "alice")
	if backend != "redis" {
		t.Setenv("REDIS_URL", "")
		return
	}
	url := redisURL(t)
	t.Setenv("REDIS_URL", url)
	t.Setenv("FIRSTMATE_REDIS_PREFIX", redisPrefix(t, url))
}

// backends runs fn against the embedded store and against Redis.
func backends(t *testing.T, fn func(t *testing.T)) {
	for _, b := range []string{"embedded", "redis"} {
		t.Run(b, func(t *testing.T) {
			adminEnv(t, b)
			fn(t)
		})
	}
}

// adminCmd runs `firstmate admin args...` in this process.
func adminCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), append([]string{"admin"}, args...), strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// mustAdmin runs admin and fails the test unless it succeeds.
func mustAdmin(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := adminCmd(t, args...)
	if code != 0 {
		t.Fatalf("admin %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
	}
	return out
}

// failAdmin runs admin and checks that it fails with code and a message
// holding each of want.
func failAdmin(t *testing.T, code int, want []string, args ...string) {
	t.Helper()
	out, errOut, got := adminCmd(t, args...)
	if got != code {
		t.Fatalf("admin %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, got, code, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Fatalf("admin %q: stderr does not say %q:\n%s", args, w, errOut)
		}
	}
}

// withStore opens the store admin uses, the way admin does, for fn. It is
// closed again at once: the embedded store admits one opener at a time.
func withStore(t *testing.T, fn func(st store)) {
	t.Helper()
	cfg, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := openStore(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fn(st)
}

func settingsOf(t *testing.T, ch agent.SessionKey) agent.ChannelSettings {
	t.Helper()
	var s agent.ChannelSettings
	withStore(t, func(st store) {
		var err error
		if s, err = st.Settings(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
	})
	return s
}

func contains(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("%s does not say %q:\n%s", what, w, text)
		}
	}
}

// toolLine returns policy show's line of a tool (or group, for "NAME (group)").
func toolLine(t *testing.T, text, name string) string {
	t.Helper()
	for l := range strings.Lines(text) {
		f := strings.Fields(l)
		if len(f) >= 2 && (f[0] == name && f[1] != "(group)" || f[0]+" "+f[1] == name) {
			return l
		}
	}
	t.Fatalf("no line of %q in:\n%s", name, text)
	return ""
}

// lineWith returns the first line of text that starts, after spaces, with
// prefix.
func lineWith(t *testing.T, text, prefix string) string {
	t.Helper()
	for l := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return l
		}
	}
	t.Fatalf("no line starts with %q in:\n%s", prefix, text)
	return ""
}

var (
	adminChan   = agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1"}
	adminThread = agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C1", Thread: "1700000000.000100"}
)

func TestAdminPolicySetShow(t *testing.T) {
	backends(t, func(t *testing.T) {
		out := mustAdmin(t, "policy", "set", "slack:T1:C1", "exec=ask", "shell=deny")
		contains(t, "policy set", out, "version 1", "cli:alice", "group:exec=ask", "shell=deny", "Warning: shell is deny")

		out = mustAdmin(t, "policy", "show", "slack:T1:C1")
		contains(t, "policy show", toolLine(t, out, "shell"), "deny", "rule shell, set here by cli:alice")
		contains(t, "policy show", toolLine(t, out, "start"), "ask", "rule group:exec, set here by cli:alice")
		contains(t, "policy show", toolLine(t, out, "exec (group)"), "ask", "cli:alice")
		contains(t, "policy show", toolLine(t, out, "ls"), "allow", "rule default, from the config")
		contains(t, "policy show", out, "stored version 1", "Rules set for this channel", "group:exec=ask  by cli:alice", "Warning: shell is deny, but start is ask")

		s := settingsOf(t, adminChan)
		if r := s.Tools["group:exec"]; r.Mode != agent.ToolAsk || r.By != "cli:alice" || time.Since(r.At) > time.Minute {
			t.Fatalf("stored group:exec rule = %+v", r)
		}

		// Another channel is untouched; a thread's key names its channel.
		contains(t, "policy show of another channel", mustAdmin(t, "policy", "show", "slack:T1:C2"), "No rules are set", "stored version 0")
		mustAdmin(t, "policy", "set", adminThread.String(), "shell=default", "default=ask", "tool:read=deny")
		s = settingsOf(t, adminChan)
		if _, ok := s.Tools["shell"]; ok || s.Version != 2 || s.Tools["default"].Mode != agent.ToolAsk || s.Tools["read"].Mode != agent.ToolDeny {
			t.Fatalf("after shell=default default=ask tool:read=deny: %+v", s)
		}
		out = mustAdmin(t, "policy", "show", "slack:T1:C1")
		contains(t, "policy show", toolLine(t, out, "shell"), "ask", "rule group:exec")
		contains(t, "policy show", toolLine(t, out, "read"), "deny", "rule read,")
		contains(t, "policy show", toolLine(t, out, "ls"), "ask", "rule default, set here by cli:alice")

		mustAdmin(t, "policy", "reset", "slack:T1:C1")
		if s := settingsOf(t, adminChan); len(s.Tools) != 0 || s.Version != 3 {
			t.Fatalf("after reset: %+v", s)
		}

		// The terminal chat's channel.
		mustAdmin(t, "policy", "set", "console", "web=deny")
		if s := settingsOf(t, console.Key); s.Tools["group:web"].Mode != agent.ToolDeny {
			t.Fatalf("console settings: %+v", s)
		}
		contains(t, "policy show console", mustAdmin(t, "policy", "show", "console"), "Tool policy of console", "fetch")
	})
}

func TestAdminPolicyRejectsInvalid(t *testing.T) {
	adminEnv(t, "embedded")
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"policy", "set", "slack:T1:C1", "exec=ask", "bogus=deny"}, 1, []string{`"bogus" is neither a tool here nor a group`, "shell"}},
		{[]string{"policy", "set", "slack:T1:C1", "exec=maybe"}, 1, []string{`"maybe" is not a mode`}},
		{[]string{"policy", "set", "slack:T1:C1", "exec=ask", "group:exec=deny"}, 1, []string{"named twice"}},
		{[]string{"policy", "set", "slack:T1:C1", "exec"}, 2, []string{`"exec" is not RULE=MODE`, "Usage:"}},
		{[]string{"policy", "set", "slack:T1:C1", "=ask"}, 2, []string{"Usage:"}},
		{[]string{"policy", "set", "slack:T1:C1"}, 2, []string{"wrong number of arguments", "Usage:"}},
		{[]string{"policy", "set", "slack:C1", "exec=ask"}, 1, []string{"slack:TEAM:CHANNEL", "telegram:CHAT"}},
		{[]string{"policy", "set", "slack::C1", "exec=ask"}, 1, []string{"slack:TEAM:CHANNEL"}},
		{[]string{"policy", "show", "C1"}, 1, []string{"slack:TEAM:CHANNEL"}},
		{[]string{"policy", "show"}, 2, []string{"Usage:"}},
		{[]string{"policy", "frob"}, 2, []string{`unknown command "policy frob"`}},
		{[]string{"frobnicate"}, 2, []string{`unknown command "frobnicate"`}},
		{nil, 2, []string{"Usage:"}},
		{[]string{"policy", "show", "slack:T1:C1", "--bogus"}, 2, []string{"flag provided but not defined"}},
	} {
		failAdmin(t, tc.code, tc.want, tc.args...)
	}
	// Nothing was written, not even to the audit log.
	if s := settingsOf(t, adminChan); s.Version != 0 {
		t.Fatalf("settings after invalid commands: %+v", s)
	}
	withStore(t, func(st store) {
		if log, err := st.AuditLog(t.Context(), govern.AuditQuery{}); err != nil || len(log) != 0 {
			t.Fatalf("audit log after invalid commands: %+v, %v", log, err)
		}
	})
	contains(t, "admin help", mustAdmin(t, "help"), "policy set", "access allow", "pair approve", "audit")
}

func TestAdminConcurrentPolicySet(t *testing.T) {
	backends(t, func(t *testing.T) {
		for round, rules := range [][2]string{{"exec=ask", "web=deny"}, {"shell=deny", "fetch=ask"}, {"default=ask", "send=deny"}} {
			var wg sync.WaitGroup
			codes := make([]int, 2)
			outs := make([]string, 2)
			for i, rule := range rules {
				wg.Go(func() {
					var out, errb bytes.Buffer
					codes[i] = run(t.Context(), []string{"admin", "policy", "set", "telegram:-100123", rule}, strings.NewReader(""), &out, &errb)
					outs[i] = out.String() + errb.String()
				})
			}
			wg.Wait()
			for i := range codes {
				if codes[i] != 0 {
					t.Fatalf("round %d: policy set %s: exit %d\n%s", round, rules[i], codes[i], outs[i])
				}
			}
			s := settingsOf(t, agent.SessionKey{Platform: "telegram", Chat: "-100123"})
			if s.Version != int64(2*(round+1)) {
				t.Fatalf("round %d: version %d, want %d", round, s.Version, 2*(round+1))
			}
			show := mustAdmin(t, "policy", "show", "telegram:-100123")
			for _, r := range rules[:] {
				name, mode, _ := strings.Cut(r, "=")
				rule := name
				if slices.Contains(agent.Groups(), name) {
					rule = agent.GroupRule(name)
				}
				if got := s.Tools[rule]; got.Mode != agent.ToolMode(mode) || got.By != "cli:alice" {
					t.Fatalf("round %d: rule %s = %+v, want %s (both writes must land)", round, rule, got, mode)
				}
				contains(t, "policy show", show, rule+"="+mode)
			}
		}
	})
}

const adminConfig = `
slack:
  access: allowlist
  allowed_channels: [C0123ABCD]
telegram:
  access: allowlist
  allowed_users: ["111"]
pairing:
  code_ttl: 30m
`

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "firstmate.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func allowedIn(t *testing.T, platform string, kind govern.GrantKind, id string) bool {
	t.Helper()
	var ok bool
	withStore(t, func(st store) {
		var err error
		if ok, err = st.Allowed(t.Context(), platform, kind, id); err != nil {
			t.Fatal(err)
		}
	})
	return ok
}

func TestAdminAccess(t *testing.T) {
	backends(t, func(t *testing.T) {
		cfg := writeConfig(t, adminConfig)
		out := mustAdmin(t, "access", "list", "--config", cfg)
		contains(t, "access list", out, "slack: access allowlist", "telegram: access allowlist")
		contains(t, "access list", lineWith(t, out, "user  111"), "config (telegram.allowed_users)")
		contains(t, "access list", lineWith(t, out, "chat  C0123ABCD"), "config (slack.allowed_channels)")

		// Flags go before or after the arguments; a negative chat ID is an
		// argument.
		contains(t, "access allow", mustAdmin(t, "access", "allow", "telegram", "user", "42", "--name", "Ann B", "--config", cfg), "Allowed: telegram user 42 (Ann B)")
		mustAdmin(t, "access", "allow", "--config", cfg, "telegram", "chat", "-1001234567890")
		if !allowedIn(t, "telegram", govern.GrantUser, "42") || !allowedIn(t, "telegram", govern.GrantChat, "-1001234567890") {
			t.Fatal("grants not stored")
		}
		out = mustAdmin(t, "access", "list", "telegram", "--config", cfg)
		if strings.Contains(out, "slack") {
			t.Fatalf("access list telegram shows slack:\n%s", out)
		}
		contains(t, "access list telegram", lineWith(t, out, "user  42"), "Ann B", "granted by cli:alice at ")
		contains(t, "access list telegram", lineWith(t, out, "chat  -1001234567890"), "granted by cli:alice")

		contains(t, "access revoke", mustAdmin(t, "access", "revoke", "telegram", "user", "42", "--config", cfg), "Revoked: telegram user 42")
		if allowedIn(t, "telegram", govern.GrantUser, "42") {
			t.Fatal("grant still stored after revoke")
		}
		failAdmin(t, 1, []string{"telegram user 42 has no grant to revoke"}, "access", "revoke", "telegram", "user", "42", "--config", cfg)
		failAdmin(t, 1, []string{"allowed by the config (telegram.allowed_users)", "cannot be revoked here"}, "access", "revoke", "telegram", "user", "111", "--config", cfg)
		failAdmin(t, 1, []string{`platform "mastodon"`, "slack, telegram"}, "access", "allow", "mastodon", "user", "1")
		failAdmin(t, 2, []string{`"admin": want user or chat`}, "access", "allow", "telegram", "admin", "1")
		failAdmin(t, 2, []string{"wrong number of arguments"}, "access", "allow", "telegram", "user")

		// A grant for an ID the config lists too: revoking it says the
		// config still lets it in.
		mustAdmin(t, "access", "allow", "slack", "chat", "C0123ABCD", "--config", cfg)
		contains(t, "access revoke", mustAdmin(t, "access", "revoke", "slack", "chat", "C0123ABCD", "--config", cfg), "the config still allows it (slack.allowed_channels)")
		if out := mustAdmin(t, "access", "list", "slack", "--config", cfg); strings.Contains(out, "granted") {
			t.Fatalf("access list after revoking every grant:\n%s", out)
		}
	})
}

func TestAdminPair(t *testing.T) {
	backends(t, func(t *testing.T) {
		cfg := writeConfig(t, adminConfig)
		contains(t, "pair list", mustAdmin(t, "pair", "list", "--config", cfg), "No pairing requests are waiting")
		now := time.Now().UTC()
		p := govern.Pairing{Code: govern.NewCode(), Platform: "telegram", Kind: govern.GrantUser, ID: "77", Name: "Zed\x1b[31m",
			Chat: agent.SessionKey{Platform: "telegram", Chat: "77"}, Created: now, Expires: now.Add(50*time.Minute + 30*time.Second)}
		short := govern.Pairing{Code: govern.NewCode(), Platform: "telegram", Kind: govern.GrantChat, ID: "-100555", Name: "crew",
			Chat: agent.SessionKey{Platform: "telegram", Chat: "-100555"}, Created: now, Expires: now.Add(time.Second)}
		withStore(t, func(st store) {
			for _, p := range []govern.Pairing{p, short} {
				if _, created, err := st.Pair(t.Context(), p); err != nil || !created {
					t.Fatalf("Pair: %v, created %v", err, created)
				}
			}
		})

		out := mustAdmin(t, "pair", "list", "--config", cfg)
		contains(t, "pair list", lineWith(t, out, p.Code), "telegram", "user 77", `Zed\x1b[31m`, "telegram:77", "in 50m30s")
		contains(t, "pair list", lineWith(t, out, short.Code), "chat -100555", "crew")

		// Typed the way people type codes: lower case, no dash.
		typed := strings.ToLower(strings.ReplaceAll(p.Code, "-", ""))
		contains(t, "pair approve", mustAdmin(t, "pair", "approve", typed, "--config", cfg), "Approved: telegram user 77")
		if !allowedIn(t, "telegram", govern.GrantUser, "77") {
			t.Fatal("approved pairing granted nothing")
		}
		withStore(t, func(st store) {
			gs, err := st.Grants(t.Context(), "telegram")
			if err != nil || len(gs) != 1 || gs[0].By != "cli:alice" || gs[0].Name != p.Name {
				t.Fatalf("grants after approval: %+v, %v", gs, err)
			}
		})
		failAdmin(t, 1, []string{"pairing code " + p.Code + " is unknown or expired", "codes last 30m"}, "pair", "approve", p.Code, "--config", cfg)

		time.Sleep(time.Until(short.Expires) + 200*time.Millisecond)
		failAdmin(t, 1, []string{"unknown or expired"}, "pair", "approve", short.Code, "--config", cfg)
		if allowedIn(t, "telegram", govern.GrantChat, "-100555") {
			t.Fatal("an expired code granted access")
		}
		contains(t, "pair list", mustAdmin(t, "pair", "list", "--config", cfg), "No pairing requests are waiting")
		failAdmin(t, 1, []string{"unknown or expired"}, "pair", "approve", "NOPE-NOPE", "--config", cfg)
	})
}

func TestAdminAudit(t *testing.T) {
	backends(t, func(t *testing.T) {
		start := time.Now()
		mustAdmin(t, "policy", "set", "slack:T1:C1", "exec=ask")
		mustAdmin(t, "policy", "set", "telegram:-100123", "web=deny")
		mustAdmin(t, "access", "allow", "telegram", "user", "42", "--name", "Ann")

		out := mustAdmin(t, "audit")
		contains(t, "audit", lineWith(t, out, "TIME"), "ACTION", "CHANNEL", "USER", "TOOL", "ARGS", "OUTCOME", "DURATION", "DETAIL")
		lines := strings.Split(strings.TrimSpace(out), "\n")[1:]
		if len(lines) != 3 {
			t.Fatalf("audit printed %d entries, want 3:\n%s", len(lines), out)
		}
		contains(t, "audit", lines[0], "policy.set", "slack:T1:C1", "cli:alice", "ok", "group:exec=ask")
		contains(t, "audit", lines[1], "policy.set", "telegram:-100123", "group:web=deny")
		contains(t, "audit", lines[2], "access.allow", "telegram", "cli:alice", "user 42 (Ann)")

		out = mustAdmin(t, "audit", "--channel", "slack:T1:C1")
		if strings.Contains(out, "telegram") || !strings.Contains(out, "group:exec=ask") {
			t.Fatalf("audit --channel slack:T1:C1:\n%s", out)
		}
		// The channel may be written as a session key too.
		if out2 := mustAdmin(t, "audit", "--channel", adminThread.String()); out2 != out {
			t.Fatalf("audit --channel of a thread:\n%s\nwant\n%s", out2, out)
		}

		out = mustAdmin(t, "audit", "--json")
		var entries []govern.AuditEntry
		for l := range strings.Lines(out) {
			var e govern.AuditEntry
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("audit --json line %q: %v", l, err)
			}
			entries = append(entries, e)
		}
		if len(entries) != 3 || entries[0].Channel != adminChan.String() || entries[1].Channel != "telegram::-100123:" ||
			entries[2].Action != govern.AuditAccessAllow || entries[2].User != "cli:alice" || entries[0].ID == "" || entries[0].Time.Before(start.Add(-time.Second)) {
			t.Fatalf("audit --json = %+v", entries)
		}

		out = mustAdmin(t, "audit", "--json", "--limit", "1")
		if strings.Count(out, "\n") != 1 || !strings.Contains(out, govern.AuditAccessAllow) {
			t.Fatalf("audit --json --limit 1:\n%s", out)
		}
		if out := mustAdmin(t, "audit", "--since", "1h"); strings.Count(out, "\n") != 4 {
			t.Fatalf("audit --since 1h:\n%s", out)
		}
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		contains(t, "audit --since "+future, mustAdmin(t, "audit", "--since", future), "No audit entries match")
		failAdmin(t, 2, []string{"--since yesterday", "RFC 3339"}, "audit", "--since", "yesterday")
		failAdmin(t, 2, []string{"--limit"}, "audit", "--limit", "0")
		failAdmin(t, 1, []string{"slack:TEAM:CHANNEL"}, "audit", "--channel", "C1")
	})
}

// jobsOn returns the job board of the store admin uses and the space
// the shell files ch's jobs under: its workspace directory's name, found
// by opening the workspace as a turn does.
func jobsOn(t *testing.T, ch agent.SessionKey, fn func(b tools.JobBoard, space string)) {
	t.Helper()
	ws, err := tools.OpenWorkspace(t.TempDir(), ch.String())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	withStore(t, func(st store) {
		b, ok := st.(tools.JobBoard)
		if !ok {
			t.Fatalf("%T keeps no job board", st)
		}
		fn(b, filepath.Base(ws.Dir()))
	})
}

// An admin lists a channel's jobs and stops one from the terminal, with no
// power over exec: the request is left on the board for the replica that
// runs the job, which kills it at its next beat.
func TestAdminJobs(t *testing.T) {
	backends(t, func(t *testing.T) {
		now := time.Now().Truncate(time.Second)
		running := tools.Job{ID: 1, Owner: "web-0#1", Command: "npm run dev", Log: ".jobs/1.log", Started: now.Add(-5 * time.Minute), Seen: now,
			CPU: 1500 * time.Millisecond, Session: adminThread.String(), User: "U2", UserName: "Ann"}
		ended := tools.Job{ID: 2, Owner: "web-1#1", Command: "make\x1b[2J", Log: ".jobs/2.log", Started: now.Add(-time.Hour), Seen: now.Add(-50 * time.Minute),
			Ended: now.Add(-50 * time.Minute), State: "exit code 0", CPU: 20 * time.Second}
		elsewhere := agent.SessionKey{Platform: "slack", Team: "T1", Chat: "C2"}
		jobsOn(t, adminChan, func(b tools.JobBoard, sp string) {
			for _, j := range []tools.Job{running, ended} {
				if _, err := b.NextJobID(t.Context(), sp); err != nil {
					t.Fatal(err)
				}
				if err := b.PutJob(t.Context(), sp, j); err != nil {
					t.Fatal(err)
				}
			}
		})
		jobsOn(t, elsewhere, func(b tools.JobBoard, sp string) {
			b.NextJobID(t.Context(), sp)
			if err := b.PutJob(t.Context(), sp, tools.Job{ID: 1, Owner: "web-0#1", Command: "other channel's", Started: now, Seen: now}); err != nil {
				t.Fatal(err)
			}
		})

		out := mustAdmin(t, "jobs", "list", "slack:T1:C1")
		contains(t, "jobs list", lineWith(t, out, "ID"), "STATE", "COMMAND", "STARTED BY", "STARTED", "CPU")
		contains(t, "jobs list", lineWith(t, out, "1 "), "running on web-0#1 (seen ", "npm run dev", "Ann (U2)", stamp(running.Started), "1.5s")
		contains(t, "jobs list", lineWith(t, out, "2 "), "exit code 0", `make\x1b[2J`, "20s")
		if strings.Contains(out, "other channel's") || strings.Contains(out, "\x1b") {
			t.Fatalf("jobs list shows another channel's job or a raw escape:\n%s", out)
		}
		// A thread's key names its channel.
		if out2 := mustAdmin(t, "jobs", "list", adminThread.String()); strings.Count(out2, "\n") != strings.Count(out, "\n") {
			t.Fatalf("jobs list of a thread:\n%s\nwant\n%s", out2, out)
		}

		contains(t, "jobs stop", mustAdmin(t, "jobs", "stop", "slack:T1:C1", "1"), "Asked web-0#1, the replica running job 1 (npm run dev), to stop it")
		contains(t, "jobs stop of an ended job", mustAdmin(t, "jobs", "stop", "slack:T1:C1", "2"), "Job 2 of slack:T1:C1 had already ended: exit code 0.")
		jobsOn(t, adminChan, func(b tools.JobBoard, sp string) {
			all, err := b.Jobs(t.Context(), sp)
			if err != nil || len(all) != 2 || all[0].StopAsked != "cli:alice" || all[1].StopAsked != "" {
				t.Fatalf("board after jobs stop = %+v, %v; want job 1, and only it, asked to stop by cli:alice", all, err)
			}
		})
		jobsOn(t, elsewhere, func(b tools.JobBoard, sp string) {
			if all, _ := b.Jobs(t.Context(), sp); len(all) != 1 || all[0].StopAsked != "" {
				t.Fatalf("another channel's board = %+v", all)
			}
		})
		contains(t, "jobs list", lineWith(t, mustAdmin(t, "jobs", "list", "slack:T1:C1"), "1 "), "stop asked by cli:alice")

		lines := strings.Split(strings.TrimSpace(mustAdmin(t, "audit")), "\n")[1:]
		if len(lines) != 1 {
			t.Fatalf("audit after jobs stop: %q; want one entry, of the stop asked", lines)
		}
		contains(t, "audit", lines[0], govern.AuditJobStopped, "slack:T1:C1", "cli:alice", "asked", "job 1 (npm run dev) on web-0#1")

		failAdmin(t, 1, []string{"slack:T1:C1 has no job 9"}, "jobs", "stop", "slack:T1:C1", "9")
		failAdmin(t, 2, []string{`"x" is not a job ID`, "Usage:"}, "jobs", "stop", "slack:T1:C1", "x")
		failAdmin(t, 1, []string{"slack:TEAM:CHANNEL"}, "jobs", "list", "C1")
		failAdmin(t, 2, []string{"wrong number of arguments"}, "jobs", "stop", "slack:T1:C1")
		failAdmin(t, 2, []string{`unknown command "jobs kill"`}, "jobs", "kill", "slack:T1:C1", "1")
		contains(t, "jobs list of a channel with none", mustAdmin(t, "jobs", "list", "telegram:-100123"), "No background jobs in telegram:-100123.")
	})
}

func TestParseChannel(t *testing.T) {
	for in, want := range map[string]agent.SessionKey{
		"slack:T1:C1":                 adminChan,
		" slack:T1:C1 ":               adminChan,
		"slack:T1:C1:":                adminChan,
		"slack:T1:C1:1700000000.0001": adminChan,
		"telegram:-100123":            {Platform: "telegram", Chat: "-100123"},
		"telegram::-100123:42":        {Platform: "telegram", Chat: "-100123"},
		"console":                     console.Key,
		"x:a%3Ab:c:":                  {Platform: "x", Team: "a:b", Chat: "c"},
	} {
		got, err := parseChannel(in)
		if err != nil || got != want {
			t.Errorf("parseChannel(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if err == nil {
			if back, err := parseChannel(channelName(got)); err != nil || back != got {
				t.Errorf("parseChannel(channelName(%+v) = %q) = %+v, %v", got, channelName(got), back, err)
			}
		}
	}
	for _, in := range []string{"", "C1", "slack:C1", "slack::C1", "slack:T1:", "telegram:", "telegram", "x:y", "a:b:c:d:e", "slack:T1:C1:%zz"} {
		if k, err := parseChannel(in); err == nil {
			t.Errorf("parseChannel(%q) = %+v, want an error", in, k)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		name string
		json bool
	}{
		{[]string{"a", "--name", "N", "b"}, []string{"a", "b"}, "N", false},
		{[]string{"--json", "a", "-1001", "--name=M"}, []string{"a", "-1001"}, "M", true},
		{[]string{"a", "--", "--name", "-x"}, []string{"a", "--name", "-x"}, "", false},
		{[]string{"-", "b"}, []string{"-", "b"}, "", false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		name := fs.String("name", "", "")
		js := fs.Bool("json", false, "")
		pos, err := parseInterspersed(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || *name != tc.name || *js != tc.json {
			t.Errorf("parseInterspersed(%q) = %q, name %q, json %v, %v", tc.args, pos, *name, *js, err)
		}
	}
}
