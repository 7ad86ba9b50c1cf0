package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/firstmate/firstmate/agent"
)

// This file reads tool calls written in the text protocol:
//
//	[TOOL] name(arguments) [/TOOL]
//
// The arguments are positional (mapped to the tool's Params in order),
// named (name=value or name: value, after any positional ones), or one
// JSON object that is the whole argument object:
//
//	[TOOL] read("notes.md", 1, 20) [/TOOL]
//	[TOOL] read("notes.md", limit=20) [/TOOL]
//	[TOOL] write({"path": "a.txt", "content": "x"}) [/TOOL]
//
// Values are JSON, read leniently, because models write what they have seen
// elsewhere: strings in double or single quotes with JSON escapes (an
// unknown escape such as \d in a regular expression is kept as written),
// raw newlines inside strings, triple-quoted """…""" strings taken exactly
// as written (a newline right after the opening quotes is dropped), numbers,
// true/false/null (and Python's True/False/None), arrays and objects with
// quoted or bare keys and trailing commas. Also accepted: no parentheses for
// no arguments, name{…} without parentheses, a missing [/TOOL] at the very
// end of the reply, and {"name": …, "arguments": {…}} in place of name(…).
//
// A call that cannot be read is not an error of the reply: it comes back
// as a parsedCall with Err set, saying what and where (line and column
// within the call), so the model can be told and write it again.

// maxDepth bounds nesting of arrays and objects, so no input can exhaust
// the stack.
const maxDepth = 64

// parsedCall is one call read from a text-protocol reply.
type parsedCall struct {
	Name string
	Args json.RawMessage // a JSON object; nil when Err is set
	Raw  string          // the call as written, markers included
	Err  error
}

// syntaxError is what was wrong with a call, and where.
type syntaxError struct {
	msg       string
	line, col int // 1-based, counted from the call's [TOOL] marker
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("%s (line %d, column %d of the call)", e.msg, e.line, e.col)
}

// parseToolCalls splits a reply into its prose and its calls, in order.
// Without calls, the prose is the reply unchanged; with calls, it is the
// text around them, each piece trimmed, joined by blank lines.
func parseToolCalls(text string, tools []agent.ToolSpec) (string, []parsedCall) {
	var (
		calls []parsedCall
		prose []string
		pos   int
	)
	for {
		i := indexFold(text[pos:], callOpen)
		if i < 0 {
			prose = append(prose, text[pos:])
			break
		}
		start := pos + i
		prose = append(prose, text[pos:start])
		c, end := parseCall(text, start, tools)
		calls = append(calls, c)
		pos = end
	}
	if len(calls) == 0 {
		return text, nil
	}
	parts := prose[:0]
	for _, s := range prose {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n"), calls
}

// parseCall reads the call whose marker is at text[start:] and returns it
// with the offset just after it.
func parseCall(text string, start int, tools []agent.ToolSpec) (parsedCall, int) {
	p := &parser{src: text, pos: start + len(callOpen), start: start}
	name, args, err := p.call(tools)
	if err == nil {
		p.skipSpace()
		rest := text[p.pos:]
		switch {
		case hasPrefixFold(rest, callClose):
			p.pos += len(callClose)
		case rest == "", hasPrefixFold(rest, callOpen):
			// The closing marker is often left off at the end of a reply
			// or before the next call; the call itself is complete.
		default:
			err = p.errorf("expected %s after the call, found %s", callClose, p.next())
		}
	}
	if err != nil {
		end := resync(text, start+len(callOpen))
		return parsedCall{Name: name, Raw: text[start:end], Err: err}, end
	}
	return parsedCall{Name: name, Args: args, Raw: text[start:p.pos]}, p.pos
}

// resync finds where a call that could not be read ends: after its
// [/TOOL], or where the next call begins, or at the end of the text.
func resync(text string, from int) int {
	closeAt := indexFold(text[from:], callClose)
	openAt := indexFold(text[from:], callOpen)
	switch {
	case closeAt >= 0 && (openAt < 0 || closeAt < openAt):
		return from + closeAt + len(callClose)
	case openAt >= 0:
		return from + openAt
	}
	return len(text)
}

type parser struct {
	src   string
	pos   int
	start int // offset of the call's [TOOL], for positions in messages
	depth int
	// suspect is where a string began whose text ran over a marker: when
	// parsing then fails, a closing quote is probably missing there.
	suspect int
}

func (p *parser) call(tools []agent.ToolSpec) (string, json.RawMessage, error) {
	p.skipSpace()
	if p.peek() == '{' {
		return p.envelope(tools)
	}
	name := p.ident()
	if name == "" {
		return "", nil, p.errorf("expected a tool name after %s, found %s", callOpen, p.next())
	}
	spec, ok := findTool(tools, name)
	if !ok {
		return name, nil, unknownTool(name, tools)
	}
	p.skipSpace()
	rest := p.src[p.pos:]
	switch {
	case p.peek() == '(':
		p.pos++
		args, err := p.arguments(spec)
		return name, args, err
	case p.peek() == '{':
		args, err := p.object()
		return name, args, err
	case rest == "", hasPrefixFold(rest, callClose), hasPrefixFold(rest, callOpen):
		return name, json.RawMessage("{}"), nil
	}
	return name, nil, p.errorf("expected ( after the tool name %s, found %s", name, p.next())
}

// envelope reads {"name": "read", "arguments": {…}}, a form models know
// from other tool-calling formats.
func (p *parser) envelope(tools []agent.ToolSpec) (string, json.RawMessage, error) {
	pos := p.pos
	obj, err := p.object()
	if err != nil {
		return "", nil, err
	}
	var env struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Args       json.RawMessage `json:"args"`
		Parameters json.RawMessage `json:"parameters"`
	}
	bad := p.errorfAt(pos, `expected a tool name, then its arguments: name(arguments), or {"name": "…", "arguments": {…}}`)
	if json.Unmarshal(obj, &env) != nil || env.Name == "" {
		return "", nil, bad
	}
	if _, ok := findTool(tools, env.Name); !ok {
		return env.Name, nil, unknownTool(env.Name, tools)
	}
	args := env.Arguments
	for _, alt := range []json.RawMessage{env.Args, env.Parameters} {
		if len(args) == 0 {
			args = alt
		}
	}
	norm, problem := normalizeArgs(string(args))
	if problem != "" {
		return env.Name, nil, p.errorfAt(pos, `the "arguments" of the call must be a JSON object`)
	}
	return env.Name, norm, nil
}

type argument struct {
	key string
	val []byte
	pos int
}

func (p *parser) arguments(spec agent.ToolSpec) (json.RawMessage, error) {
	var positional, named []argument
	p.skipSpace()
	if p.peek() == ')' {
		p.pos++
		return json.RawMessage("{}"), nil
	}
list:
	for n := 1; ; n++ {
		p.skipSpace()
		pos := p.pos
		key, isNamed := p.keyword()
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		if isNamed {
			named = append(named, argument{key, val, pos})
		} else {
			if len(named) > 0 {
				return nil, p.errorfAt(pos, "argument %d has no name but follows a named one; put the unnamed arguments first", n)
			}
			positional = append(positional, argument{"", val, pos})
		}
		p.skipSpace()
		switch {
		case p.peek() == ',':
			p.pos++
			p.skipSpace()
			if p.peek() == ')' { // a trailing comma
				p.pos++
				break list
			}
		case p.peek() == ')':
			p.pos++
			break list
		case p.eof():
			return nil, p.errorf("the argument list is never closed: expected , or ) after argument %d", n)
		default:
			return nil, p.errorf("expected , or ) after argument %d, found %s", n, p.next())
		}
	}

	if len(positional) == 1 && len(named) == 0 && positional[0].val[0] == '{' && objectForm(spec, positional[0].val) {
		return positional[0].val, nil
	}
	params := paramsOf(spec)
	if len(positional) > len(params) {
		if len(params) == 0 {
			return nil, p.errorfAt(positional[0].pos, "%s takes no arguments", spec.Name)
		}
		return nil, p.errorfAt(positional[len(params)].pos, "%s takes at most %d arguments (%s), but got %d",
			spec.Name, len(params), strings.Join(params, ", "), len(positional))
	}
	var b bytes.Buffer
	b.WriteByte('{')
	seen := map[string]bool{}
	for i, a := range append(positional, named...) {
		key := a.key
		if i < len(positional) {
			key = params[i]
		}
		if seen[key] {
			return nil, p.errorfAt(a.pos, "argument %s is given twice", key)
		}
		seen[key] = true
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, key)
		b.WriteByte(':')
		b.Write(a.val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// objectForm decides whether a lone object argument is the whole argument
// object (the JSON-object form) or the value of the first argument. It is
// the whole object unless the first argument itself takes an object and
// the lone object's keys are not all argument names.
func objectForm(spec agent.ToolSpec, obj []byte) bool {
	params := paramsOf(spec)
	if len(params) == 0 || parseSchema(spec.Schema).Properties[params[0]].typeName() != "object" {
		return true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil || len(m) == 0 {
		return false
	}
	for k := range m {
		if !slices.Contains(params, k) {
			return false
		}
	}
	return true
}

// keyword consumes "name=" or "name:" (the name bare or quoted) and
// reports whether it did; otherwise it leaves the position unchanged.
func (p *parser) keyword() (string, bool) {
	save := p.pos
	var key string
	switch c := p.peek(); {
	case isIdentStart(c):
		key = p.ident()
	case (c == '"' || c == '\'') && !strings.HasPrefix(p.src[p.pos:], strings.Repeat(string(c), 3)):
		s, err := p.str()
		if err != nil {
			p.pos = save
			return "", false // value() will report it
		}
		key = s
	default:
		return "", false
	}
	p.skipSpace()
	if c := p.peek(); c == '=' || c == ':' {
		p.pos++
		return key, true
	}
	p.pos = save
	return "", false
}

// value reads one value and returns it as JSON.
func (p *parser) value() ([]byte, error) {
	p.skipSpace()
	c := p.peek()
	switch {
	case p.eof():
		return nil, p.errorf("expected a value, found the end of the reply")
	case hasPrefixFold(p.src[p.pos:], callClose):
		return nil, p.errorf("expected a value, found %s", callClose)
	case c == '"' || c == '\'':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		writeString(&b, s)
		return b.Bytes(), nil
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '-' || c == '+' || isDigit(c):
		return p.number()
	case isIdentStart(c):
		pos := p.pos
		switch w := p.ident(); w {
		case "true", "True":
			return []byte("true"), nil
		case "false", "False":
			return []byte("false"), nil
		case "null", "None":
			return []byte("null"), nil
		default:
			return nil, p.errorfAt(pos, "%s is not quoted; write text in double quotes, like %q", w, w)
		}
	}
	return nil, p.errorf("expected a value, found %s", p.next())
}

func (p *parser) object() ([]byte, error) {
	if p.depth >= maxDepth {
		return nil, p.errorf("the arguments are nested more than %d deep", maxDepth)
	}
	p.depth++
	defer func() { p.depth-- }()
	open := p.pos
	p.pos++ // {
	var b bytes.Buffer
	b.WriteByte('{')
	for first := true; ; first = false {
		p.skipSpace()
		if p.peek() == '}' {
			p.pos++
			b.WriteByte('}')
			return b.Bytes(), nil
		}
		if p.eof() {
			return nil, p.errorfAt(open, "the { here is never closed")
		}
		var key string
		switch c := p.peek(); {
		case c == '"' || c == '\'':
			s, err := p.str()
			if err != nil {
				return nil, err
			}
			key = s
		case isIdentStart(c):
			key = p.ident()
		default:
			return nil, p.errorf("expected a key in double quotes, found %s", p.next())
		}
		p.skipSpace()
		if c := p.peek(); c != ':' && c != '=' {
			return nil, p.errorf("expected : after the key %q, found %s", key, p.next())
		}
		p.pos++
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		if !first {
			b.WriteByte(',')
		}
		writeString(&b, key)
		b.WriteByte(':')
		b.Write(val)
		p.skipSpace()
		switch {
		case p.peek() == ',':
			p.pos++
		case p.peek() == '}':
		case p.eof():
			return nil, p.errorfAt(open, "the { here is never closed")
		default:
			return nil, p.errorf("expected , or } after the value of %q, found %s", key, p.next())
		}
	}
}

func (p *parser) array() ([]byte, error) {
	if p.depth >= maxDepth {
		return nil, p.errorf("the arguments are nested more than %d deep", maxDepth)
	}
	p.depth++
	defer func() { p.depth-- }()
	open := p.pos
	p.pos++ // [
	var b bytes.Buffer
	b.WriteByte('[')
	for first := true; ; first = false {
		p.skipSpace()
		if p.peek() == ']' {
			p.pos++
			b.WriteByte(']')
			return b.Bytes(), nil
		}
		if p.eof() {
			return nil, p.errorfAt(open, "the [ here is never closed")
		}
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		if !first {
			b.WriteByte(',')
		}
		b.Write(val)
		p.skipSpace()
		switch {
		case p.peek() == ',':
			p.pos++
		case p.peek() == ']':
		case p.eof():
			return nil, p.errorfAt(open, "the [ here is never closed")
		default:
			return nil, p.errorf("expected , or ] in the list, found %s", p.next())
		}
	}
}

// number reads a JSON number; a leading + is dropped.
func (p *parser) number() ([]byte, error) {
	start := p.pos
	if p.peek() == '+' {
		p.pos++
	}
	num := p.pos
	bad := func() ([]byte, error) {
		end := start
		for end < len(p.src) && (isIdentChar(p.src[end]) || p.src[end] == '+') {
			end++
		}
		w := p.src[start:max(end, p.pos)]
		return nil, p.errorfAt(start, "%s is not a number; numbers are written as in JSON (e.g. 42, -1.5, 1e3), and text goes in quotes", strconv.Quote(w))
	}
	if p.peek() == '-' {
		p.pos++
	}
	switch {
	case p.peek() == '0':
		p.pos++
		if isDigit(p.peek()) {
			return bad()
		}
	case isDigit(p.peek()):
		p.digits()
	default:
		return bad()
	}
	if p.peek() == '.' {
		p.pos++
		if !isDigit(p.peek()) {
			return bad()
		}
		p.digits()
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.pos++
		if c := p.peek(); c == '+' || c == '-' {
			p.pos++
		}
		if !isDigit(p.peek()) {
			return bad()
		}
		p.digits()
	}
	if c := p.peek(); isIdentChar(c) || c == '.' {
		return bad()
	}
	return []byte(p.src[num:p.pos]), nil
}

func (p *parser) digits() {
	for isDigit(p.peek()) {
		p.pos++
	}
}

// str reads a quoted string at the current position.
func (p *parser) str() (string, error) {
	q := p.src[p.pos]
	if strings.HasPrefix(p.src[p.pos:], strings.Repeat(string(q), 3)) {
		return p.tripleQuoted(q)
	}
	open := p.pos
	p.pos++
	var b strings.Builder
	for p.pos < len(p.src) {
		// Copy the run up to the next quote or backslash in one go.
		i := strings.IndexAny(p.src[p.pos:], string(q)+`\`)
		if i < 0 {
			break
		}
		b.WriteString(p.src[p.pos : p.pos+i])
		p.pos += i
		if p.src[p.pos] == q {
			p.pos++
			if s := p.src[open:p.pos]; p.suspect == 0 && (indexFold(s, callClose) >= 0 || indexFold(s, callOpen) >= 0) {
				p.suspect = open
			}
			return b.String(), nil
		}
		p.escape(&b)
	}
	p.pos = len(p.src)
	return "", p.errorfAt(open, "the string that starts here is never closed (a closing %c is missing)", q)
}

// escape decodes the escape at the current backslash. Unknown escapes
// stay as written: \d in a regular expression or C:\Users in a path mean
// what they say.
func (p *parser) escape(b *strings.Builder) {
	if p.pos+1 >= len(p.src) {
		b.WriteByte('\\')
		p.pos++
		return
	}
	switch c := p.src[p.pos+1]; c {
	case 'n':
		b.WriteByte('\n')
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case '"', '\'', '\\', '/':
		b.WriteByte(c)
	case 'u':
		if r, n, ok := unicodeEscape(p.src[p.pos:]); ok {
			b.WriteRune(r)
			p.pos += n
			return
		}
		b.WriteString(`\u`)
	default:
		b.WriteByte('\\')
		b.WriteByte(c)
	}
	p.pos += 2
}

// unicodeEscape decodes \uXXXX at the start of s, joining a surrogate pair
// written as two escapes. It returns the rune and the bytes it used.
func unicodeEscape(s string) (rune, int, bool) {
	hex4 := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[2:6], 16, 32)
		return rune(v), err == nil
	}
	r, ok := hex4(s)
	if !ok {
		return 0, 0, false
	}
	if r >= 0xD800 && r < 0xDC00 {
		if lo, ok := hex4(s[6:]); ok && lo >= 0xDC00 && lo < 0xE000 {
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, true
		}
		return utf8.RuneError, 6, true // a lone half of a pair
	}
	if r >= 0xDC00 && r < 0xE000 {
		return utf8.RuneError, 6, true
	}
	return r, 6, true
}

// tripleQuoted reads """…""" (or the same with single quotes), taken
// exactly as written: no escapes, so code can be written as is. A newline
// just after the opening quotes is dropped, and quotes just before the
// closing ones belong to the text ("""say "hi"""" is `say "hi"`).
func (p *parser) tripleQuoted(q byte) (string, error) {
	open := p.pos
	delim := strings.Repeat(string(q), 3)
	p.pos += 3
	if strings.HasPrefix(p.src[p.pos:], "\r\n") {
		p.pos += 2
	} else if strings.HasPrefix(p.src[p.pos:], "\n") {
		p.pos++
	}
	i := strings.Index(p.src[p.pos:], delim)
	if i < 0 {
		p.pos = len(p.src)
		return "", p.errorfAt(open, "the %s string that starts here is never closed", delim)
	}
	end := p.pos + i
	for end+3 < len(p.src) && p.src[end+3] == q {
		end++
	}
	s := p.src[p.pos:end]
	p.pos = end + 3
	return s, nil
}

func (p *parser) ident() string {
	start := p.pos
	if p.pos < len(p.src) && isIdentStart(p.src[p.pos]) {
		p.pos++
		for p.pos < len(p.src) && isIdentChar(p.src[p.pos]) {
			p.pos++
		}
	}
	return p.src[start:p.pos]
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r', '\v', '\f':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

// peek returns the next byte, 0 at the end.
func (p *parser) peek() byte {
	if p.pos >= len(p.src) {
		return 0
	}
	return p.src[p.pos]
}

// next describes what comes next, for error messages.
func (p *parser) next() string {
	rest := p.src[p.pos:]
	switch {
	case rest == "":
		return "the end of the reply"
	case hasPrefixFold(rest, callClose):
		return callClose
	}
	line, _, _ := strings.Cut(rest, "\n")
	if utf8.RuneCountInString(line) > 12 {
		n := 0
		for i := range line {
			if n == 12 {
				line = line[:i] + "…"
				break
			}
			n++
		}
	}
	return strconv.Quote(line)
}

func (p *parser) errorf(format string, args ...any) error {
	return p.errorfAt(p.pos, format, args...)
}

func (p *parser) errorfAt(pos int, format string, args ...any) error {
	line, col := p.position(pos)
	msg := fmt.Sprintf(format, args...)
	if p.suspect > 0 && p.suspect < pos {
		sl, sc := p.position(p.suspect)
		msg += fmt.Sprintf("; the string at line %d, column %d runs over a %s marker, so its closing quote is probably missing", sl, sc, callOpen)
	}
	return &syntaxError{msg: msg, line: line, col: col}
}

// position is the 1-based line and column of offset pos within the call.
func (p *parser) position(pos int) (int, int) {
	before := p.src[p.start:min(pos, len(p.src))]
	return strings.Count(before, "\n") + 1, utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
}

func findTool(tools []agent.ToolSpec, name string) (agent.ToolSpec, bool) {
	for _, t := range tools {
		if t.Name == name {
			return t, true
		}
	}
	return agent.ToolSpec{}, false
}

func unknownTool(name string, tools []agent.ToolSpec) error {
	if len(tools) == 0 {
		return fmt.Errorf("there is no tool named %s, and no tools are available now; answer without %s", name, callOpen)
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return errors.New("there is no tool named " + name + "; the tools are: " + strings.Join(names, ", "))
}

func writeString(b *bytes.Buffer, s string) {
	enc, err := marshalNoEscape(s)
	if err != nil {
		panic(err) // a string always encodes
	}
	b.Write(enc)
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) || c == '-' || c == '.' }

// indexFold is strings.Index ignoring ASCII case, for an ASCII needle that
// starts with a byte that has no case (the markers start with '[').
func indexFold(s, needle string) int {
	for i := 0; i+len(needle) <= len(s); i++ {
		j := strings.IndexByte(s[i:], needle[0])
		if j < 0 {
			return -1
		}
		i += j
		if hasPrefixFold(s[i:], needle) {
			return i
		}
	}
	return -1
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		a, b := s[i], prefix[i]
		if 'a' <= a && a <= 'z' {
			a -= 'a' - 'A'
		}
		if 'a' <= b && b <= 'z' {
			b -= 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}
