package adapters

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Runes measures text in Unicode code points, as Slack counts characters.
func Runes(s string) int { return utf8.RuneCountInString(s) }

// UTF16 measures text in UTF-16 code units, as Telegram counts its limits:
// a character outside the Basic Multilingual Plane (most emoji) is two.
func UTF16(s string) int {
	n := 0
	for _, r := range s {
		n += utf16Len(r)
	}
	return n
}

func utf16Len(r rune) int {
	if r >= 0x10000 && r <= utf8.MaxRune {
		return 2
	}
	return 1
}

// Split cuts Markdown into parts that each measure at most limit, for
// platforms that cap a message's size. measure is how the platform counts
// ([Runes], [UTF16], or a function that renders the part first and counts
// what the platform will count); nil means [Runes]. A limit of zero or less
// means no limit.
//
// Cuts fall at the best boundary in the latter half of what fits: a blank
// line, then a line break, then a space, and only then between any two
// characters, never inside a UTF-8 sequence (so never inside a surrogate
// pair either). A cut inside a fenced code block closes the fence at the end
// of its part and reopens it, with the same info string (```go), at the
// start of the next. Apart from those added fence lines the parts joined
// are the input, byte for byte; whitespace at a cut stays at the end of the
// earlier part.
//
// Two cases give up on a rule rather than on the limit: a single character
// wider than the limit is a part of its own, and a fence whose opening line
// does not fit the limit is not carried over.
func Split(text string, limit int, measure func(string) int) []string {
	pieces := splitPieces(text, limit, measure)
	if pieces == nil {
		return nil
	}
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = p.String()
	}
	return out
}

// piece is one part of a split: the input's bytes in body, with fence lines
// added around them.
type piece struct {
	open  string // an opening fence line with its newline, carried over from the previous part
	body  string
	close string // a closing fence line (after a newline if body lacks one)
	// forced: the limit left no cut that keeps code blocks intact, so
	// this part or the next may render differently from the whole.
	forced bool
}

func (p piece) String() string { return p.open + p.body + p.close }

// Cut classes, best first.
const (
	cutParagraph = iota // after a blank line, or right after a code block
	cutLine             // after a line break outside code
	cutCodeLine         // after a line break inside a code block
	cutSpace            // after a space outside code
	cutAny              // between two characters
	cutCluster          // inside what reads as one character: before a combining mark, around a joiner
	numCutClasses

	// Refused cuts.
	cutFenceLike // a piece of a line would read as a fence line
	cutNever     // inside a fence's own opening or closing line
)

func splitPieces(text string, limit int, measure func(string) int) []piece {
	if text == "" {
		return nil
	}
	if measure == nil {
		measure = Runes
	}
	if limit <= 0 {
		return []piece{{body: text}}
	}
	fs := scanFences(text)
	var out []piece
	pos, reopen := 0, ""
	for pos < len(text) {
		mk := func(end int) piece {
			p := piece{open: reopen, body: text[pos:end]}
			if end == len(text) {
				return p // the last part leaves an unclosed fence as it was
			}
			if f := fs.at(end); f != nil {
				p.close = f.close
				if !strings.HasSuffix(p.body, "\n") {
					p.close = "\n" + p.close
				}
			}
			return p
		}
		fits := func(end int) bool { return measure(mk(end).String()) <= limit }
		// What fits before a closing fence is added: the closing fence
		// depends on where the cut falls, which would make the search
		// for the longest part jump.
		roughly := func(end int) bool { return measure(reopen+text[pos:end]) <= limit }

		end := bestCut(text, pos, fs, roughly, fits, true)
		var p piece
		if end == len(text) {
			out = append(out, mk(end))
			break
		}
		if end <= pos {
			// Only cuts that break a fence line's meaning would fit.
			end = bestCut(text, pos, fs, roughly, fits, false)
		}
		if end > pos {
			p = mk(end)
			p.forced = !strictCut(text, pos, end, fs)
		} else {
			// Not even one character fits with the fence lines: cut plain.
			end = lastFit(text, pos, func(end int) bool { return measure(text[pos:end]) <= limit })
			if end <= pos {
				_, w := utf8.DecodeRuneInString(text[pos:])
				end = pos + w // wider than the limit on its own
			}
			p = piece{body: text[pos:end], forced: true}
		}
		out = append(out, p)
		pos, reopen = end, ""
		if f := fs.at(end); f != nil && p.close != "" {
			reopen = f.open + "\n"
		}
	}
	return out
}

// bestCut is the end of the next part: len(text) if the rest fits, pos if
// nothing does. Candidates run up to the longest part for which roughly
// holds, and the chosen one must fit. strict refuses the cuts that cutClass
// refuses; otherwise they are the last resort.
func bestCut(text string, pos int, fs fences, roughly, fits func(int) bool, strict bool) int {
	max := lastFit(text, pos, roughly)
	if max <= pos {
		return pos
	}
	if max == len(text) && fits(max) {
		return max
	}
	var byClass [numCutClasses][]int
	// The line around x, kept up to date as x moves back.
	ls := strings.LastIndexByte(text[:max], '\n') + 1
	le := len(text)
	if i := strings.IndexByte(text[max:], '\n'); i >= 0 {
		le = max + i
	}
	for x := max; x > pos; x = boundary(text, x-1) {
		if x < ls {
			le = ls - 1
			ls = strings.LastIndexByte(text[:x], '\n') + 1
		}
		c, ok := cutClass(text, x, fs, line{start: maxInt(ls, pos), end: le})
		if c == cutFenceLike && !strict {
			c, ok = cutCluster, true
		}
		if ok {
			byClass[c] = append(byClass[c], x) // descending
		}
	}
	// The best break in the latter half of what fits, so parts are not
	// tiny; failing that, the best cut anywhere.
	half := pos + (max-pos)/2
	for c := range cutAny {
		for _, x := range byClass[c] {
			if x >= half && fits(x) {
				return x
			}
		}
	}
	for c := range byClass {
		for _, x := range byClass[c] {
			if fits(x) {
				return x
			}
		}
	}
	return pos
}

// lastFit finds the largest rune boundary end in (pos, len(text)] for which
// fits holds, assuming fits is monotone (it mostly is: a measure of rendered
// Markdown may not be, so the caller checks again). pos means none.
func lastFit(text string, pos int, fits func(int) bool) int {
	lo, hi := pos, len(text)+1 // fits(lo) assumed, fits(hi) known false
	// Probe forward in growing steps first, so that the cost of a part
	// follows the part's size rather than the size of the text left.
	for step := 256; hi > len(text); step *= 2 {
		if pos+step >= len(text) {
			// Try the whole rest first: a cut near the end may measure
			// more than the rest, with the fence lines a cut adds.
			if fits(len(text)) {
				return len(text)
			}
			break
		}
		x := boundary(text, pos+step)
		if x <= lo {
			continue
		}
		if !fits(x) {
			hi = x
			break
		}
		lo = x
	}
	for hi-lo > 1 {
		mid := boundary(text, lo+(hi-lo)/2)
		if mid <= lo {
			_, w := utf8.DecodeRuneInString(text[lo:])
			mid = lo + w
		}
		if mid >= hi {
			break
		}
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// boundary is the largest rune boundary at or before i, where runes are
// what ranging over the string yields (an invalid byte is one rune).
func boundary(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	if i <= 0 {
		return 0
	}
	for j := i; j >= 0 && j > i-utf8.UTFMax; j-- {
		if utf8.RuneStart(s[j]) {
			if _, w := utf8.DecodeRuneInString(s[j:]); j+w > i {
				return j
			}
			return i
		}
	}
	return i
}

// line is the part's line around a cut: from its start (or the part's) to
// the newline.
type line struct{ start, end int }

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// cutClass rates a cut at x (a rune boundary, pos < x < len(text)) in line
// ln, or refuses it (ok false, with why in the class). Cuts inside a
// fence's opening or closing line are refused, and so are cuts that would
// leave a piece of a line that reads as a fence line in either part:
// "a ~~~ b" cut before the tildes would open a code block that swallows
// the rest of the next part. Those are the last resort when nothing else
// fits.
func cutClass(text string, x int, fs fences, ln line) (int, bool) {
	f := fs.at(x)
	if f != nil && (x < f.contentStart || x > f.contentEnd) {
		return cutNever, false
	}
	if x > ln.start {
		head := text[ln.start:x]
		tail := strings.TrimSuffix(text[x:ln.end], "\r")
		if f == nil && (fenceLike(head) || fenceLike(tail)) {
			return cutFenceLike, false
		}
		if f != nil && (fenceClosing(head, f.marker, f.width) || fenceClosing(tail, f.marker, f.width)) {
			return cutFenceLike, false
		}
	}
	prev, _ := utf8.DecodeLastRuneInString(text[:x])
	next, _ := utf8.DecodeRuneInString(text[x:])
	if prev == '\u200d' || next == '\u200d' || isExtender(next) || isRegional(prev) && isRegional(next) {
		return cutCluster, true
	}
	if f != nil {
		switch {
		case x == f.contentStart || x == f.contentEnd:
			return cutAny, true // an empty code block on one side
		case prev == '\n':
			return cutCodeLine, true
		}
		return cutAny, true
	}
	switch prev {
	case '\n':
		before := strings.TrimSuffix(strings.TrimSuffix(text[:x], "\n"), "\r")
		if before == "" || strings.HasSuffix(before, "\n") || fs.endsAt(x) {
			return cutParagraph, true
		}
		return cutLine, true
	case ' ', '\t':
		return cutSpace, true
	}
	return cutAny, true
}

// strictCut reports whether a cut at end, in the part that starts at pos,
// is one cutClass allows.
func strictCut(text string, pos, end int, fs fences) bool {
	ls := maxInt(strings.LastIndexByte(text[:end], '\n')+1, pos)
	le := len(text)
	if i := strings.IndexByte(text[end:], '\n'); i >= 0 {
		le = end + i
	}
	_, ok := cutClass(text, end, fs, line{start: ls, end: le})
	return ok
}

// isExtender: runes that join the one before into one visible character.
func isExtender(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me) ||
		r >= 0xfe00 && r <= 0xfe0f || // variation selectors
		r >= 0x1f3fb && r <= 0x1f3ff || // skin tones
		r >= 0xe0020 && r <= 0xe007f // tag characters (flags)
}

// isRegional: flags are pairs of regional indicators.
func isRegional(r rune) bool { return r >= 0x1f1e6 && r <= 0x1f1ff }

// fence is a fenced code block of the input, by byte offsets.
type fence struct {
	start        int    // the opening line
	contentStart int    // after the opening line
	contentEnd   int    // the closing line, or the end of the text
	end          int    // after the closing line
	open         string // the opening line as written, without its line ending
	close        string // a line that closes it
	marker       byte   // ` or ~
	width        int    // how many of them
}

type fences []fence

// at is the fence x falls strictly inside, from just after its first byte
// to just before its end.
func (fs fences) at(x int) *fence {
	i := sort.Search(len(fs), func(i int) bool { return fs[i].end >= x })
	if i < len(fs) && fs[i].start < x && x < fs[i].end {
		return &fs[i]
	}
	// An unclosed fence runs to the end of the text.
	if i < len(fs) && fs[i].start < x && x == fs[i].end && fs[i].contentEnd == fs[i].end {
		return &fs[i]
	}
	return nil
}

func (fs fences) endsAt(x int) bool {
	i := sort.Search(len(fs), func(i int) bool { return fs[i].end >= x })
	return i < len(fs) && fs[i].end == x
}

// scanFences finds the fenced code blocks line by line. It is more lenient
// than CommonMark about what may precede a fence on its line (any spaces,
// tabs and blockquote markers), so fences in nested lists and quotes are
// carried over too.
func scanFences(s string) fences {
	var out fences
	var cur *fence
	var marker byte
	var width int
	for start := 0; start < len(s); {
		end, next := len(s), len(s)
		if i := strings.IndexByte(s[start:], '\n'); i >= 0 {
			end, next = start+i, start+i+1
		}
		line := strings.TrimSuffix(s[start:end], "\r")
		if cur == nil {
			if prefix, m, n, ok := fenceOpening(line); ok {
				cur = &fence{start: start, contentStart: next, open: line, close: prefix + strings.Repeat(string(m), n), marker: m, width: n}
				marker, width = m, n
			}
		} else if fenceClosing(line, marker, width) {
			cur.contentEnd, cur.end = start, next
			out = append(out, *cur)
			cur = nil
		}
		start = next
	}
	if cur != nil {
		cur.contentEnd, cur.end = len(s), len(s)
		out = append(out, *cur)
	}
	return out
}

func fencePrefix(line string) int {
	return len(line) - len(strings.TrimLeft(line, " \t>"))
}

// fenceLike: a piece of a line that, as a line of its own, would open
// a fence.
func fenceLike(s string) bool {
	_, _, _, ok := fenceOpening(s)
	return ok
}

func fenceOpening(line string) (prefix string, marker byte, width int, ok bool) {
	p := fencePrefix(line)
	rest := line[p:]
	if rest == "" || rest[0] != '`' && rest[0] != '~' {
		return "", 0, 0, false
	}
	marker = rest[0]
	width = len(rest) - len(strings.TrimLeft(rest, string(marker)))
	if width < 3 || marker == '`' && strings.ContainsRune(rest[width:], '`') {
		return "", 0, 0, false
	}
	return line[:p], marker, width, true
}

func fenceClosing(line string, marker byte, width int) bool {
	rest := line[fencePrefix(line):]
	n := len(rest) - len(strings.TrimLeft(rest, string(marker)))
	return n >= width && strings.TrimRight(rest[n:], " \t") == ""
}
