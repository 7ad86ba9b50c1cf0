package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/firstmate/firstmate/internal/config"
	"github.com/firstmate/firstmate/tools/skills"
)

// newSkills loads the skills the configuration offers, or returns nil when
// it offers none (then there is no skill tool, and the system prompt is
// the same as without skills). Skipped skills are logged.
func newSkills(cfg *config.Config, log *slog.Logger) *skills.Catalog {
	if !cfg.Skills.Enabled() {
		return nil
	}
	return skills.Load(skills.Options{Dirs: cfg.Skills.Dirs, Channel: cfg.Skills.Channel, Logger: log})
}

// skills reports the configured skills, and each one skipped and why.
func (d *doctor) skills() {
	if d.skipFaulty("skills", "skills") {
		return
	}
	s := d.cfg.Skills
	if !s.Enabled() {
		d.ok("skills", "off (set skills.dirs, or skills.channel: true, to offer skills)")
		return
	}
	cat := newSkills(d.cfg, slog.New(slog.DiscardHandler))
	var names []string
	for _, sk := range cat.Configured() {
		names = append(names, sk.Name)
	}
	line := "no configured skills"
	if len(names) > 0 {
		line = fmt.Sprintf("%d configured: %s", len(names), strings.Join(names, ", "))
	}
	if s.Channel {
		line += "; each channel's own from skills/ in its workspace"
	}
	d.ok("skills", line)
	for _, p := range cat.Problems() {
		d.warn("skills", "skipped "+p.Error())
	}
}
