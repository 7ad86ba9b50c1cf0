// Package skills offers skills to the agent: folders of instructions for a
// kind of task, loaded by the model when a task calls for one.
//
// A skill is a folder NAME holding a SKILL.md: YAML front matter with the
// skill's name (NAME again) and a description of what it is for and when
// to use it, then the instructions, in Markdown. Other files in the folder
// (scripts, templates, references) go with it.
//
// Skills come from two places. The operator's are read once, at start,
// from the configured directories ([Load]); a skill that cannot be used is
// skipped, and why is logged and kept for doctor ([Catalog.Problems]). A
// channel's own are read, every turn, from the folder skills/ of its
// workspace, through the workspace's checks (no symlink out, no special
// file, size caps), so people can write one in chat. A configured skill
// wins over a channel's skill of the same name: the operator's "deploy"
// means the same thing in every channel, and a channel cannot change what
// a policy rule about it refers to.
//
// The model sees only each skill's name and description, at the end of the
// system prompt ([Catalog.Prompt]); the skill tool ([Catalog.Tool]) loads
// the instructions and lists the other files. A channel skill's files are
// in the workspace already, where the file tools read them; a configured
// skill's files are read with the skill tool itself (text only, capped),
// so the model never gets a path outside the workspace.
//
// Which skills a channel may use is the agent's policy (rules skill:NAME
// and group:skills); this package only takes the answer as a function.
package skills

import (
	"errors"
	"fmt"
	"strings"
)

// File is the file that makes a folder a skill.
const File = "SKILL.md"

// ChannelDir is the workspace folder that holds a channel's own skills.
const ChannelDir = "skills"

// MaxNameLen bounds a skill's name.
const MaxNameLen = 64

// maxFrontMatter bounds the front matter of a SKILL.md: the name, a
// description and whatever else a skill written for another agent carries
// (license, metadata). Only this much is read to list a channel's skill.
const maxFrontMatter = 8 << 10

// Errors, for errors.Is; the message says what is wrong and how to fix it.
var (
	// ErrInvalid: a SKILL.md that is not a usable skill (no front matter,
	// a bad name, no description, …).
	ErrInvalid = errors.New("invalid skill")
	// ErrShadowed: a skill whose name another skill already has (a
	// configured one, or one read before it).
	ErrShadowed = errors.New("skill name already taken")
	// ErrNotFound: no skill has the name, or the skill has no such file.
	ErrNotFound = errors.New("no such skill")
)

// Source says where a skill comes from.
type Source string

const (
	Configured Source = "configured" // the operator's directories
	Channel    Source = "channel"    // the channel's workspace, skills/NAME
)

// Skill is one usable skill.
type Skill struct {
	Name        string
	Description string // one line
	Source      Source
	// Dir is where the folder is: a host directory for a configured skill
	// (for doctor and logs; never shown to the model), the workspace path
	// skills/NAME for a channel's.
	Dir string
	// Files are the skill's other regular files, relative to its folder,
	// sorted; FilesCut says the list stopped at the limit. Known for
	// configured skills and for a channel skill once it is loaded.
	Files    []string
	FilesCut bool

	body string // the instructions (configured skills keep them)
	base string // the configured directory the folder is in
}

// key is how skills are told apart: names are compared without case, the
// way policy rules (which people type) are.
func key(name string) string { return strings.ToLower(name) }

// Problem is a skill that cannot be used, and why.
type Problem struct {
	Source Source
	// Path is the folder or file at fault: a host path for a configured
	// skill, a workspace path for a channel's.
	Path string
	Err  error
}

func (p Problem) Error() string { return p.Path + ": " + p.Err.Error() }

// ValidName reports whether name can be a skill's name: 1 to 64 letters,
// digits, '-' and '_', starting with a letter or digit. The same names
// are valid in the policy rule skill:NAME.
func ValidName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the name is empty", ErrInvalid)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: the name is %d bytes long; use at most %d", ErrInvalid, len(name), MaxNameLen)
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case (r == '-' || r == '_') && i > 0:
		default:
			return fmt.Errorf("%w: the name %q has %s; use letters, digits, '-' and '_', starting with a letter or digit", ErrInvalid, short(name), describeRune(r, i))
		}
	}
	return nil
}

func describeRune(r rune, i int) string {
	if i == 0 && (r == '-' || r == '_') {
		return fmt.Sprintf("%q first", r)
	}
	return fmt.Sprintf("the character %q", r)
}

// short quotes at most 80 bytes of s, for messages about names that
// could be anything.
func short(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 80
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// Limits bound what skills may cost. A zero field takes its default.
type Limits struct {
	MaxSkills      int   // folders read from one source (200)
	MaxSkillBytes  int64 // a SKILL.md: front matter and instructions (64 KiB)
	MaxDescription int   // bytes of a description (1024)
	MaxFiles       int   // other files listed for one skill (100)
	MaxFileBytes   int64 // a file the skill tool reads (64 KiB)
	PromptSkills   int   // skills the system prompt lists (100)
	PromptBytes    int   // bytes of the system prompt's skills section (16 KiB)
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxSkills, 200)
	def64(&l.MaxSkillBytes, 64<<10)
	def(&l.MaxDescription, 1024)
	def(&l.MaxFiles, 100)
	def64(&l.MaxFileBytes, 64<<10)
	def(&l.PromptSkills, 100)
	def(&l.PromptBytes, 16<<10)
	return l
}

// maxDepth bounds how deep a skill's files are listed.
const maxDepth = 8
