package files

import (
	"path"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// glob is a compiled find/grep pattern: path.Match syntax within one name,
// "**" for any number of directories. A pattern without "/" matches a name
// at any depth, as find -name does.
type glob struct {
	segs     []string
	baseOnly bool
}

func compileGlob(pattern string) (*glob, error) {
	p := pattern
	if strings.HasPrefix(p, tools.MountPoint+"/") {
		p = p[len(tools.MountPoint)+1:]
	}
	p = strings.TrimPrefix(p, "./")
	switch {
	case strings.TrimSpace(p) == "":
		return nil, badArgs("the pattern is empty; give a glob such as *.md or **/*.go")
	case strings.HasPrefix(p, "/"):
		return nil, badArgs("the pattern %q is absolute; patterns are relative to path (the workspace root by default)", pattern)
	case strings.IndexByte(p, 0) >= 0:
		return nil, badArgs("the pattern contains a NUL byte")
	}
	g := &glob{baseOnly: !strings.Contains(p, "/")}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "", ".":
			continue
		case "..":
			return nil, badArgs(`the pattern %q contains ".."; to search elsewhere, set path`, pattern)
		case "**":
			if n := len(g.segs); n > 0 && g.segs[n-1] == "**" {
				continue // a/**/**/b is a/**/b
			}
		default:
			if _, err := path.Match(seg, ""); err != nil {
				return nil, badArgs("the pattern %q is not a valid glob (%v); use * ? [abc] and **", pattern, err)
			}
		}
		g.segs = append(g.segs, seg)
	}
	if len(g.segs) == 0 {
		return nil, badArgs("the pattern %q names nothing; give a glob such as *.md or **/*.go", pattern)
	}
	if g.baseOnly && len(g.segs) == 1 && g.segs[0] == "**" {
		g.baseOnly = false
	}
	return g, nil
}

// match reports whether rel (slash-separated, relative to the search
// base) matches.
func (g *glob) match(rel string) bool {
	if g.baseOnly {
		ok, _ := path.Match(g.segs[0], path.Base(rel))
		return ok
	}
	return matchSegs(g.segs, strings.Split(rel, "/"))
}

// matchSegs matches pattern segments against name segments; "**" matches
// zero or more names. Dynamic programming keeps it O(len(pat)·len(names))
// however many "**" there are.
func matchSegs(pat, names []string) bool {
	// ok[j]: pat[:i] matches names[:j], for the current i.
	ok := make([]bool, len(names)+1)
	ok[0] = true
	for _, p := range pat {
		next := make([]bool, len(names)+1)
		if p == "**" {
			seen := false
			for j := range ok {
				seen = seen || ok[j]
				next[j] = seen
			}
		} else {
			for j := 1; j <= len(names); j++ {
				if ok[j-1] {
					m, _ := path.Match(p, names[j-1])
					next[j] = m
				}
			}
		}
		ok = next
	}
	return ok[len(names)]
}
