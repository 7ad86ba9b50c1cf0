package skills

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// frontMatter is what a SKILL.md's front matter must say. Other keys
// (license, metadata, allowed-tools: skills written for other agents carry
// them) are ignored.
type frontMatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// parsed is a SKILL.md read: its name and description, and its body when
// the whole file was read.
type parsed struct {
	name, description, body string
}

// parse reads a SKILL.md. When whole is false, data is only the start of
// the file, enough for the front matter, and no body is returned or
// checked. Front matter is a line "---", YAML, and a line "---"; a UTF-8
// byte order mark and CRLF line ends are forgiven.
func parse(data []byte, whole bool, lim Limits) (parsed, error) {
	data = bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))
	line, rest, ok := cutLine(data)
	if !ok && !whole {
		return parsed{}, invalid("the file does not begin with a front matter line (---)")
	}
	if strings.TrimRight(string(line), " \t\r") != "---" {
		return parsed{}, invalid("it must begin with front matter: a line ---, then name: and description:, then a line ---, then the instructions")
	}
	var yml []byte
	var body []byte
	closed := false
	for off := 0; off < len(rest); {
		l, after, complete := cutLine(rest[off:])
		if strings.TrimRight(string(l), " \t\r") == "---" && (complete || whole) {
			yml, body, closed = rest[:off], after, true
			break
		}
		if !complete {
			break
		}
		off = len(rest) - len(after)
	}
	if !closed {
		if len(rest) >= maxFrontMatter {
			return parsed{}, invalid(fmt.Sprintf("the front matter is not closed by a line --- within %d KiB", maxFrontMatter>>10))
		}
		return parsed{}, invalid("the front matter is not closed by a line ---")
	}
	if len(yml) > maxFrontMatter {
		return parsed{}, invalid(fmt.Sprintf("the front matter is over %d KiB; keep it to the name and a description", maxFrontMatter>>10))
	}
	fm, err := decodeYAML(yml)
	if err != nil {
		return parsed{}, err
	}
	p := parsed{name: strings.TrimSpace(fm.Name), description: oneLine(fm.Description)}
	if p.name == "" {
		return parsed{}, invalid("the front matter has no name:")
	}
	if err := ValidName(p.name); err != nil {
		return parsed{}, err
	}
	switch {
	case p.description == "":
		return parsed{}, invalid("the front matter has no description: say what the skill is for and when to use it")
	case len(p.description) > lim.MaxDescription:
		return parsed{}, invalid(fmt.Sprintf("the description is %d bytes; keep it under %d (the details belong in the instructions)", len(p.description), lim.MaxDescription))
	}
	if whole {
		p.body = strings.TrimSpace(string(body))
		if p.body == "" {
			return parsed{}, invalid("there are no instructions after the front matter")
		}
	}
	return p, nil
}

// decodeYAML reads front matter, which may come from anyone who can write
// in a channel's workspace: a parser panic on a hostile document is a bad
// skill, not a dead process.
func decodeYAML(yml []byte) (fm frontMatter, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = invalid("the front matter could not be read as YAML")
		}
	}()
	if err := yaml.Unmarshal(yml, &fm); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.Join(strings.Fields(msg), " ")
		return frontMatter{}, invalid("the front matter is not valid YAML with a name and a description as text: " + short(msg))
	}
	return fm, nil
}

func invalid(msg string) error { return fmt.Errorf("%w: %s: %s", ErrInvalid, File, msg) }

// cutLine returns data's first line (without its '\n'), what follows,
// and whether the line ended with a '\n'.
func cutLine(data []byte) (line, rest []byte, complete bool) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return data[:i], data[i+1:], true
	}
	return data, nil, false
}

// oneLine makes a description one line of plain text for the system
// prompt's list: runs of white space (line breaks included) become one
// space, and control characters are dropped.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return ' '
		}
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
