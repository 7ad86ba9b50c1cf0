package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDefaultFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  env
		want []string
	}{
		{"home", env{"HOME": "/home/mate"},
			[]string{"./firstmate.yaml", "/home/mate/.config/firstmate/config.yaml", "/etc/firstmate/config.yaml"}},
		{"xdg", env{"HOME": "/home/mate", "XDG_CONFIG_HOME": "/xdg"},
			[]string{"./firstmate.yaml", "/xdg/firstmate/config.yaml", "/etc/firstmate/config.yaml"}},
		{"relative xdg is ignored", env{"HOME": "/home/mate", "XDG_CONFIG_HOME": "xdg"},
			[]string{"./firstmate.yaml", "/home/mate/.config/firstmate/config.yaml", "/etc/firstmate/config.yaml"}},
		{"no home", env{},
			[]string{"./firstmate.yaml", "/etc/firstmate/config.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefaultFiles(tc.env.lookup); !slices.Equal(got, tc.want) {
				t.Errorf("DefaultFiles = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFindFileOrder(t *testing.T) {
	e := env{"HOME": "/home/mate"}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		exist []string
		want  string
	}{
		{nil, ""},
		{[]string{"/etc/firstmate/config.yaml"}, "/etc/firstmate/config.yaml"},
		{[]string{"/etc/firstmate/config.yaml", "/home/mate/.config/firstmate/config.yaml"}, "/home/mate/.config/firstmate/config.yaml"},
		{[]string{"/etc/firstmate/config.yaml", "/home/mate/.config/firstmate/config.yaml", "./firstmate.yaml"}, filepath.Join(cwd, "firstmate.yaml")},
	} {
		got := findFile(e.lookup, func(p string) bool { return slices.Contains(tc.exist, p) })
		if got != tc.want {
			t.Errorf("with %q: %q, want %q", tc.exist, got, tc.want)
		}
	}
}

// TestFindFileReal finds a file in the XDG directory on disk, and skips a
// directory where a file is looked for.
func TestFindFileReal(t *testing.T) {
	xdg := t.TempDir()
	e := env{"XDG_CONFIG_HOME": xdg}
	want := filepath.Join(xdg, "firstmate", "config.yaml")
	if err := os.MkdirAll(want, 0o700); err != nil { // a directory: not a config file
		t.Fatal(err)
	}
	if got := FindFile(e.lookup); got == want {
		t.Fatalf("FindFile took a directory: %q", got)
	}
	os.Remove(want)
	if err := os.WriteFile(want, []byte("llm:\n  model: m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := FindFile(e.lookup); got != want {
		t.Fatalf("FindFile = %q, want %q", got, want)
	}
}

func TestProblemPlatform(t *testing.T) {
	path := writeConfig(t, "slack:\n  bot_tokn: x\n")
	_, err := Load(path, env{"SLACK_BOT_TOKEN": "xoxb-1", "TELEGRAM_ALLOWED_USERS": "abc", "FIRSTMATE_LOG_LEVEL": "loud"}.withHome().lookup)
	got := map[string]string{}
	for _, p := range problems(t, err) {
		got[p.Key] = p.Platform()
	}
	want := map[string]string{
		"slack.bot_tokn":         "slack",    // an unknown key in the file
		"SLACK_BOT_TOKEN":        "slack",    // no app token or signing secret: named by the variable that set it
		"TELEGRAM_ALLOWED_USERS": "telegram", // a bad entry, named by the variable
		"FIRSTMATE_LOG_LEVEL":    "",
	}
	for k, w := range want {
		if p, ok := got[k]; !ok || p != w {
			t.Errorf("problem %s: platform %q (found: %v), want %q; all: %v", k, p, ok, w, got)
		}
	}
}
