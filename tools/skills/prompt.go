package skills

import (
	"context"
	"fmt"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// promptHead starts the system prompt's skills section. It is fixed text:
// the section changes only when the skills listed under it do.
const promptHead = `# Skills

A skill holds instructions for one kind of task, and sometimes files to use with them. The skills you can use are listed below, each with what it is for. When a task matches a skill's description, load the skill with the ` + ToolName + ` tool before you start, then follow its instructions. Do not load skills a task does not need.
`

// noteRoom is kept free in the section for the note on skills left out.
const noteRoom = 256

// Prompt is the section of a turn's system prompt that lists the skills
// allowed in ws's channel (allowed is the channel's policy for a skill's
// name; nil allows all): "- name: description" lines, sorted by name, at
// most PromptSkills of them and PromptBytes in all, with a note saying how
// many were left out. It is "" when no skill is allowed. The same skills
// give the same text, byte for byte, so a provider's prompt cache holds
// until the skills change.
func (c *Catalog) Prompt(ctx context.Context, ws *tools.Workspace, allowed func(name string) bool) string {
	all, probs := c.Available(ctx, ws)
	for _, p := range probs {
		// Every turn reads the channel's skills again: a problem there is
		// for whoever looks, not a warning each turn. The skill tool says
		// it to the model when the skill is asked for.
		c.log.Debug("channel skill skipped", "path", p.Path, "reason", p.Err.Error())
	}
	var b strings.Builder
	listed, left := 0, 0
	for _, sk := range all {
		if allowed != nil && !allowed(sk.Name) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString(promptHead)
			b.WriteString("\n")
		}
		line := "- " + sk.Name + ": " + sk.Description + "\n"
		if listed == c.lim.PromptSkills || b.Len()+len(line) > c.lim.PromptBytes-noteRoom {
			left++
			continue
		}
		b.WriteString(line)
		listed++
	}
	if left > 0 {
		fmt.Fprintf(&b, "[%d more skill(s) can be used here but are not listed, to keep this prompt short. If a person names a skill that is not listed, try loading it by name.]\n", left)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
