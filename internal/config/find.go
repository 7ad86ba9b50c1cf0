package config

import (
	"os"
	"path/filepath"
)

// DefaultFiles lists, in order, where a command looks for its config file
// when neither its command line (--config) nor FIRSTMATE_CONFIG names one:
// firstmate.yaml in the working directory, config.yaml in the user's
// configuration directory ($XDG_CONFIG_HOME/firstmate, by default
// ~/.config/firstmate), then /etc/firstmate/config.yaml for a service.
// A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
func DefaultFiles(env func(string) (string, bool)) []string {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	files := []string{"./firstmate.yaml"}
	if x, ok := lookup(env, "XDG_CONFIG_HOME"); ok && filepath.IsAbs(x) {
		files = append(files, filepath.Join(x, "firstmate", "config.yaml"))
	} else if h, ok := lookup(env, "HOME"); ok {
		files = append(files, filepath.Join(h, ".config", "firstmate", "config.yaml"))
	}
	return append(files, "/etc/firstmate/config.yaml")
}

// FindFile returns the first of [DefaultFiles] that exists, as an absolute
// path, or "" when none does: then the defaults and the environment are
// the whole configuration, which is fine. It does not look at
// FIRSTMATE_CONFIG ([Load] does): call it only when that is not set.
func FindFile(env func(string) (string, bool)) string {
	return findFile(env, func(p string) bool {
		// A file this user cannot read is still the one found: Load then
		// says so, rather than firstmate running without it unawares.
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir()
	})
}

func findFile(env func(string) (string, bool), exists func(string) bool) string {
	for _, p := range DefaultFiles(env) {
		if exists(p) {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
			return p
		}
	}
	return ""
}
