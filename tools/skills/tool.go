package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// ToolName is the name of the tool that loads a skill.
const ToolName = "skill"

// Args are the arguments of the skill tool.
type Args struct {
	Name string `json:"name" jsonschema:"the skill's name, as listed under Skills in the system prompt"`
	File string `json:"file,omitempty" jsonschema:"one of the skill's files to read instead of its instructions: a path relative to the skill's folder, as the skill lists it"`
}

const toolDescription = `Load a skill: the instructions for one kind of task, and the list of files that go with them. The skills you can use are listed, with what each is for, at the end of the system prompt; load one when a task matches it, before you start, and follow it.
With file set, read one of the skill's files instead (text only). A channel's own skills are also in the workspace, under skills/NAME/, where the file tools read them.
People in a channel can add a skill of their own: a folder skills/NAME/ in the workspace holding a SKILL.md that starts with front matter (a line ---, name: NAME, description: what it is for and when to use it, a line ---) followed by the instructions in Markdown. NAME is letters, digits, - and _.`

// Tool is the skill tool. Besides the [tools.Tool] contract it says which
// skill a call loads ([Tool.SkillName]), so that the agent can apply the
// channel's policy for that skill before the call runs: a call of a
// skill the channel does not allow never reaches the tool.
type Tool struct {
	tools.Tool
}

// Tool returns the skill tool over the catalog.
func (c *Catalog) Tool() *Tool {
	return &Tool{tools.New(ToolName, tools.PowerSkills, toolDescription, func(ctx context.Context, ws *tools.Workspace, a Args) (tools.Result, error) {
		return c.call(ctx, ws, a)
	})}
}

// ToolName is the name of the tool that loads the catalog's skills.
func (c *Catalog) ToolName() string { return ToolName }

// SkillName returns the name (lower case) of the skill a call with args
// loads, or "" if the arguments name none that could exist; such a call
// fails in the tool.
func (t *Tool) SkillName(args json.RawMessage) string {
	var a struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	name := strings.TrimSpace(a.Name)
	if ValidName(name) != nil {
		return ""
	}
	return key(name)
}

// Needs implements [tools.Scoped]: a call needs its skill's power
// (skill:NAME) and, to read one of the skill's other files, read: a file
// copied into a skill's folder is a workspace file like any other, and
// what read denies must not come out this way.
func (t *Tool) Needs(args json.RawMessage) []tools.Power {
	name := t.SkillName(args)
	if name == "" {
		return nil
	}
	var a struct {
		File string `json:"file"`
	}
	if json.Unmarshal(args, &a) == nil && strings.TrimSpace(a.File) != "" {
		return []tools.Power{tools.SkillPower(name), tools.PowerRead}
	}
	return []tools.Power{tools.SkillPower(name)}
}

var _ tools.Scoped = (*Tool)(nil)

func (c *Catalog) call(ctx context.Context, ws *tools.Workspace, a Args) (tools.Result, error) {
	name := strings.TrimSpace(a.Name)
	if err := ValidName(name); err != nil {
		return tools.Result{}, fmt.Errorf("%w; give a skill's name as the system prompt lists it", err)
	}
	if err := ctx.Err(); err != nil {
		return tools.Result{}, err
	}
	sk, err := c.find(ctx, ws, name)
	if err != nil {
		return tools.Result{}, err
	}
	if a.File != "" {
		return c.readFile(ws, sk, a.File)
	}
	var b strings.Builder
	switch sk.Source {
	case Channel:
		fmt.Fprintf(&b, "Skill %s (this channel's own, in the workspace at %s/). Follow these instructions:\n\n", sk.Name, sk.Dir)
	default:
		fmt.Fprintf(&b, "Skill %s. Follow these instructions:\n\n", sk.Name)
	}
	b.WriteString(sk.body)
	b.WriteString("\n")
	if len(sk.Files) > 0 {
		switch sk.Source {
		case Channel:
			fmt.Fprintf(&b, "\nFiles of this skill, in the workspace under %s/ (read them with the file tools):\n", sk.Dir)
		default:
			fmt.Fprintf(&b, "\nFiles of this skill (read one with the %s tool: name %q, file set to its path; to run or change one, write it to the workspace first):\n", ToolName, sk.Name)
		}
		for _, f := range sk.Files {
			b.WriteString("- " + f + "\n")
		}
		if sk.FilesCut {
			fmt.Fprintf(&b, "[only the first %d files are listed]\n", len(sk.Files))
		}
	}
	return tools.Result{Text: strings.TrimSuffix(b.String(), "\n"), Summary: "skill " + sk.Name}, nil
}

// readFile reads one file of a skill: through the workspace for a
// channel's skill; for a configured one, only a file the skill lists,
// through an os.Root of its directory, text only and capped.
func (c *Catalog) readFile(ws *tools.Workspace, sk Skill, file string) (tools.Result, error) {
	if strings.HasPrefix(file, "/") {
		return tools.Result{}, fmt.Errorf("%w: file %q must be a path relative to the skill's folder, as the skill lists it", ErrNotFound, short(file))
	}
	rel, err := tools.CleanFilePath(file)
	if err != nil {
		return tools.Result{}, err
	}
	summary := fmt.Sprintf("skill %s: %s", sk.Name, rel)
	if sk.Source == Channel {
		text, _, err := ws.ReadText(path.Join(sk.Dir, rel), c.lim.MaxFileBytes)
		if err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Text: text, Summary: summary}, nil
	}
	if !slices.Contains(sk.Files, rel) {
		return tools.Result{}, fmt.Errorf("%w: the skill %s has no file %q; its files are: %s", ErrNotFound, sk.Name, short(rel), listOrNone(sk.Files))
	}
	root, err := os.OpenRoot(sk.base)
	if err != nil {
		return tools.Result{}, fmt.Errorf("the skill %s's files cannot be read here now: %w", sk.Name, unwrapPath(err))
	}
	defer root.Close()
	data, err := readRootFile(root, path.Join(sk.Name, rel), c.lim.MaxFileBytes)
	if err != nil {
		if errors.Is(err, tools.ErrTooLarge) || errors.Is(err, tools.ErrBinary) {
			return tools.Result{}, fmt.Errorf("%s of the skill %s cannot be read with this tool: %w", rel, sk.Name, err)
		}
		return tools.Result{}, fmt.Errorf("%s of the skill %s: %w", rel, sk.Name, err)
	}
	if len(data) == 0 {
		return tools.Result{Text: fmt.Sprintf("(%s is empty)", rel), Summary: summary}, nil
	}
	return tools.Result{Text: string(data), Summary: summary}, nil
}

func listOrNone(files []string) string {
	if len(files) == 0 {
		return "none"
	}
	return strings.Join(files, ", ")
}
