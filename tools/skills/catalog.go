package skills

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// Options configure a [Catalog].
type Options struct {
	// Dirs hold the operator's skills, one folder each. Read once, by
	// Load; an earlier directory wins over a later one for a name.
	Dirs []string
	// Channel reads each channel's own skills from its workspace's
	// skills/ folder, every turn.
	Channel bool
	Limits  Limits
	// Logger is told each configured skill that is skipped, and why.
	Logger *slog.Logger
}

// Catalog is every skill this process offers: the operator's, read once,
// and each channel's, read from its workspace when needed. It is safe for
// concurrent use.
type Catalog struct {
	configured []Skill // sorted by key
	byKey      map[string]int
	problems   []Problem
	channel    bool
	lim        Limits
	log        *slog.Logger
}

// Load reads the configured directories. It does not fail: a directory
// that cannot be read and a skill that cannot be used are problems,
// logged and listed by [Catalog.Problems], and the rest is offered.
func Load(opts Options) *Catalog {
	c := &Catalog{byKey: map[string]int{}, channel: opts.Channel, lim: opts.Limits.withDefaults(), log: opts.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	for _, dir := range opts.Dirs {
		skills, probs := loadDir(dir, c.lim)
		c.problems = append(c.problems, probs...)
		for _, sk := range skills {
			if i, ok := c.byKey[key(sk.Name)]; ok {
				c.problems = append(c.problems, Problem{Configured, sk.Dir, fmt.Errorf("%w: %s in %s has the same name and comes first", ErrShadowed, c.configured[i].Name, c.configured[i].base)})
				continue
			}
			c.byKey[key(sk.Name)] = len(c.configured)
			c.configured = append(c.configured, sk)
		}
	}
	slices.SortFunc(c.configured, func(a, b Skill) int { return cmp.Compare(key(a.Name), key(b.Name)) })
	for i, sk := range c.configured {
		c.byKey[key(sk.Name)] = i
	}
	for _, p := range c.problems {
		c.log.Warn("skill skipped", "path", p.Path, "reason", p.Err.Error())
	}
	return c
}

// Configured returns the operator's skills, sorted by name. The slice must
// not be modified.
func (c *Catalog) Configured() []Skill { return c.configured }

// Problems returns why configured skills (or directories) were skipped.
func (c *Catalog) Problems() []Problem { return slices.Clone(c.problems) }

// Available returns the skills a turn in ws's channel can use before
// policy: the configured ones and, when channel skills are on, those of
// ws's skills/ folder that are valid and not shadowed, sorted by name;
// and the problems of the channel's folder. ws may be nil (no channel
// skills).
func (c *Catalog) Available(ctx context.Context, ws *tools.Workspace) ([]Skill, []Problem) {
	if !c.channel || ws == nil {
		return c.configured, nil
	}
	own, probs := c.channelSkills(ctx, ws)
	if len(own) == 0 {
		return c.configured, probs
	}
	all := slices.Concat(c.configured, own)
	slices.SortFunc(all, func(a, b Skill) int { return cmp.Compare(key(a.Name), key(b.Name)) })
	return all, probs
}

// channelSkills lists ws's skills/ folder: each folder with a valid
// SKILL.md whose name is the folder's, only the front matter read.
func (c *Catalog) channelSkills(ctx context.Context, ws *tools.Workspace) ([]Skill, []Problem) {
	ents, err := ws.ReadDir(ChannelDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []Problem{{Channel, ChannelDir, err}}
	}
	var out []Skill
	var probs []Problem
	seen := map[string]string{}
	n := 0
	for _, e := range ents {
		if ctx.Err() != nil {
			break
		}
		name := e.Name()
		if e.Type().IsRegular() && name == File {
			probs = append(probs, Problem{Channel, path.Join(ChannelDir, name), fmt.Errorf("%w: a skill is a folder, %s/NAME/ with its %s inside", ErrInvalid, ChannelDir, File)})
			continue
		}
		if strings.HasPrefix(name, ".") || e.Type().IsRegular() {
			continue // hidden, or a file beside the skills (a README)
		}
		if n == c.lim.MaxSkills {
			probs = append(probs, Problem{Channel, ChannelDir, fmt.Errorf("only the first %d skill folders are read; the rest are skipped", c.lim.MaxSkills)})
			break
		}
		n++
		sk, err := c.channelSkill(ctx, ws, name, false)
		if err != nil {
			probs = append(probs, Problem{Channel, path.Join(ChannelDir, name), err})
			continue
		}
		if first, ok := seen[key(name)]; ok {
			probs = append(probs, Problem{Channel, sk.Dir, fmt.Errorf("%w: skills/%s has the same name (names are compared without case)", ErrShadowed, first)})
			continue
		}
		seen[key(name)] = name
		out = append(out, sk)
	}
	return out, probs
}

// channelSkill reads the skill in ws's folder skills/NAME: its front
// matter only, or (whole) all of SKILL.md and the list of its files. The
// folder must be a real directory (not a link), and SKILL.md passes the
// workspace's checks: no link out, no special file, no hard link, not too
// large, text.
func (c *Catalog) channelSkill(ctx context.Context, ws *tools.Workspace, name string, whole bool) (Skill, error) {
	dir := path.Join(ChannelDir, name)
	if err := ValidName(name); err != nil {
		return Skill{}, fmt.Errorf("%w (a folder's name is its skill's name)", err)
	}
	if _, ok := c.byKey[key(name)]; ok {
		return Skill{}, fmt.Errorf("%w: a configured skill has this name, and the configured one is used; rename this folder (and the name in its SKILL.md)", ErrShadowed)
	}
	fi, err := ws.Lstat(dir)
	if err != nil {
		return Skill{}, err
	}
	if !fi.IsDir() {
		return Skill{}, fmt.Errorf("%w: it is %s; a skill is a folder in the workspace, not a link to one", tools.ErrNotRegular, tools.KindOf(fi.Mode()))
	}
	file := path.Join(dir, File)
	var data []byte
	if whole {
		text, _, err := ws.ReadText(file, c.lim.MaxSkillBytes)
		if err != nil {
			return Skill{}, err
		}
		data = []byte(text)
		if tools.IsBinary(data, true) {
			return Skill{}, fmt.Errorf("%w: %s is not UTF-8 text", tools.ErrBinary, File)
		}
	} else {
		f, _, err := ws.OpenText(file, c.lim.MaxSkillBytes)
		if err != nil {
			return Skill{}, err
		}
		data, err = io.ReadAll(io.LimitReader(f, maxFrontMatter+64))
		f.Close()
		if err != nil {
			return Skill{}, fmt.Errorf("%s could not be read: %w", File, unwrapPath(err))
		}
	}
	p, err := parse(data, whole, c.lim)
	if err != nil {
		return Skill{}, err
	}
	if p.name != name {
		return Skill{}, fmt.Errorf("%w: the name in %s, %q, is not the folder's name %q; make them the same", ErrInvalid, File, p.name, name)
	}
	sk := Skill{Name: p.name, Description: p.description, Source: Channel, Dir: dir, body: p.body}
	if whole {
		sk.Files, sk.FilesCut = c.listWorkspace(ctx, ws, dir)
	}
	return sk, nil
}

// listWorkspace lists the regular files under dir in ws (SKILL.md and
// hidden entries left out), sorted, at most MaxFiles of them. The
// workspace's walk never follows a symlink.
func (c *Catalog) listWorkspace(ctx context.Context, ws *tools.Workspace, dir string) (files []string, cut bool) {
	_ = ws.Walk(ctx, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if strings.HasPrefix(d.Name(), ".") || rel == File {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if strings.Count(rel, "/") >= maxDepth {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if len(files) == c.lim.MaxFiles {
			cut = true
			return fs.SkipAll
		}
		files = append(files, rel)
		return nil
	})
	return files, cut
}

// find returns the skill called name (any case) for a turn in ws's
// channel, whole: a configured one, else the channel's.
func (c *Catalog) find(ctx context.Context, ws *tools.Workspace, name string) (Skill, error) {
	if i, ok := c.byKey[key(name)]; ok {
		return c.configured[i], nil
	}
	if !c.channel || ws == nil {
		return Skill{}, fmt.Errorf("%w %q; the skills you can use are listed in the system prompt", ErrNotFound, name)
	}
	// The folder may be spelled in another case than the call.
	ents, err := ws.ReadDir(ChannelDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Skill{}, err
	}
	for _, e := range ents {
		if key(e.Name()) == key(name) {
			sk, err := c.channelSkill(ctx, ws, e.Name(), true)
			if err != nil {
				return Skill{}, fmt.Errorf("the skill in %s/%s cannot be used: %w", ChannelDir, e.Name(), err)
			}
			return sk, nil
		}
	}
	return Skill{}, fmt.Errorf("%w %q; the skills you can use are listed in the system prompt (a channel's own are folders in %s/ of the workspace)", ErrNotFound, name, ChannelDir)
}
