package skills

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidName(t *testing.T) {
	good := []string{"a", "deploy", "pdf-report", "Weekly_Summary", "x1", "9lives", strings.Repeat("n", MaxNameLen)}
	bad := []string{"", "-lead", "_lead", "has space", "dot.ted", "slash/ed", "../up", "ümlaut", "tab\t", strings.Repeat("n", MaxNameLen+1), "skill:x"}
	for _, n := range good {
		if err := ValidName(n); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range bad {
		if err := ValidName(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidName(%q) = %v, want ErrInvalid", n, err)
		}
	}
}

func TestParse(t *testing.T) {
	lim := Limits{}.withDefaults()
	cases := []struct {
		name, in string
		want     parsed
		err      string // part of the message; "" for success
	}{
		{"plain", "---\nname: deploy\ndescription: Deploy the app.\n---\n# Deploy\nRun it.\n",
			parsed{"deploy", "Deploy the app.", "# Deploy\nRun it."}, ""},
		{"bom and crlf", "\xEF\xBB\xBF---\r\nname: deploy\r\ndescription: Deploy it.\r\n---\r\nSteps.\r\n",
			parsed{"deploy", "Deploy it.", "Steps."}, ""},
		{"other keys are ignored", "---\nname: a\ndescription: b\nlicense: MIT\nmetadata: {owner: ops}\nallowed-tools: [shell]\n---\nbody",
			parsed{"a", "b", "body"}, ""},
		{"folded description is one line", "---\nname: a\ndescription: >\n  Use this\n  when asked.\n\n  Twice.\n---\nbody",
			parsed{"a", "Use this when asked. Twice.", "body"}, ""},
		{"control characters dropped", "---\nname: a\ndescription: \"bell\\a here\"\n---\nbody",
			parsed{"a", "bell here", "body"}, ""},
		{"trailing spaces on the fence", "--- \nname: a\ndescription: b\n---  \nbody", parsed{"a", "b", "body"}, ""},
		{"no front matter", "# Deploy\nRun it.\n", parsed{}, "must begin with front matter"},
		{"empty", "", parsed{}, "must begin with front matter"},
		{"not closed", "---\nname: a\ndescription: b\nbody\n", parsed{}, "not closed"},
		{"not yaml", "---\nname: [a\ndescription: b\n---\nbody", parsed{}, "not valid YAML"},
		{"name is a list", "---\nname: [a, b]\ndescription: b\n---\nbody", parsed{}, "not valid YAML"},
		{"duplicate key", "---\nname: a\nname: b\ndescription: c\n---\nbody", parsed{}, "not valid YAML"},
		{"top level list", "---\n- a\n---\nbody", parsed{}, "not valid YAML"},
		{"no name", "---\ndescription: b\n---\nbody", parsed{}, "no name"},
		{"bad name", "---\nname: ../etc\ndescription: b\n---\nbody", parsed{}, "use letters, digits"},
		{"no description", "---\nname: a\n---\nbody", parsed{}, "no description"},
		{"blank description", "---\nname: a\ndescription: \"  \\n \"\n---\nbody", parsed{}, "no description"},
		{"long description", "---\nname: a\ndescription: " + strings.Repeat("x", 1025) + "\n---\nbody", parsed{}, "keep it under 1024"},
		{"no body", "---\nname: a\ndescription: b\n---\n  \n", parsed{}, "no instructions"},
		{"fence without newline at the end", "---\nname: a\ndescription: b\n---", parsed{}, "no instructions"},
		{"alias bomb", "---\na: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nname: a\ndescription: b\n---\nbody",
			parsed{"a", "b", "body"}, ""}, // ignored keys are never expanded into our struct
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parse([]byte(c.in), true, lim)
			if c.err == "" {
				if err != nil || got != c.want {
					t.Fatalf("parse = %+v, %v; want %+v", got, err, c.want)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("parse = %+v, %v; want ErrInvalid saying %q", got, err, c.err)
			}
		})
	}
}

// Reading only the head of a file (to list a channel's skill) finds the
// same name and description, and no body.
func TestParseHead(t *testing.T) {
	lim := Limits{}.withDefaults()
	in := "---\nname: a\ndescription: b\n---\n" + strings.Repeat("body ", 5000)
	got, err := parse([]byte(in[:100]), false, lim)
	if err != nil || got != (parsed{name: "a", description: "b"}) {
		t.Fatalf("head = %+v, %v", got, err)
	}
	// A fence cut in the middle is not a fence.
	if _, err := parse([]byte("---\nname: a\ndescription: b\n--"), false, lim); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cut fence: %v", err)
	}
	// Front matter that does not end within the head is refused.
	long := "---\nname: a\ndescription: b\nx: " + strings.Repeat("y", maxFrontMatter+100)
	if _, err := parse([]byte(long), false, lim); err == nil || !strings.Contains(err.Error(), "within 8 KiB") {
		t.Fatalf("long front matter: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("---\nname: deploy\ndescription: Deploy the app.\n---\nRun it.\n"), true)
	f.Add([]byte("\xEF\xBB\xBF---\r\nname: a\r\ndescription: >\r\n  b\r\n---\r\nc"), false)
	f.Add([]byte("---\n&a [*a]\n---\n"), true)
	f.Add([]byte("---\nname: !!binary aGVsbG8=\ndescription: x\n---\ny"), true)
	lim := Limits{}.withDefaults()
	f.Fuzz(func(t *testing.T, data []byte, whole bool) {
		p, err := parse(data, whole, lim)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if ValidName(p.name) != nil {
			t.Fatalf("invalid name %q accepted", p.name)
		}
		if p.description == "" || len(p.description) > lim.MaxDescription || strings.ContainsAny(p.description, "\n\r\t") || !utf8.ValidString(p.description) {
			t.Fatalf("bad description %q accepted", p.description)
		}
		if whole == (p.body == "") {
			t.Fatalf("whole=%v but body %q", whole, p.body)
		}
	})
}
