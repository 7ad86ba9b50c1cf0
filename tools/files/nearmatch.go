package files

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// readPrefix matches the line numbers read puts before each line.
var readPrefix = regexp.MustCompile(`^\s*\d+\t`)

// notFound explains, after the path, why old is not in content and what
// the nearest text is, so the model can retry with the file's real text.
func notFound(content, old string) string {
	var b strings.Builder
	b.WriteString("does not contain old. ")
	oldLines := strings.Split(strings.Trim(old, "\n"), "\n")
	if readPrefix.MatchString(oldLines[0]) {
		b.WriteString("old seems to include the line numbers that read shows; leave them out. ")
	}
	fileLines := strings.Split(content, "\n")
	if at := matchIgnoringSpace(fileLines, oldLines); at >= 0 {
		fmt.Fprintf(&b, "Lines %d-%d match it apart from whitespace (indentation, tabs or trailing spaces); copy them exactly:\n", at+1, at+len(oldLines))
		writeLines(&b, fileLines, at, at+len(oldLines))
	} else if near := closestLines(fileLines, oldLines, 3); len(near) > 0 {
		b.WriteString("The closest lines are:\n")
		for _, i := range near {
			writeLines(&b, fileLines, i, i+1)
		}
	}
	b.WriteString("The file is unchanged.")
	return b.String()
}

func writeLines(b *strings.Builder, lines []string, lo, hi int) {
	for i := lo; i < hi && i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\r")
		if len(line) > 300 {
			line = string(cutUTF8([]byte(line), 300)) + " …"
		}
		fmt.Fprintf(b, "%6d\t%s\n", i+1, text([]byte(line)))
	}
}

// matchIgnoringSpace finds where old's lines occur in the file's lines
// when runs of whitespace do not count; -1 if nowhere (or nowhere unique).
func matchIgnoringSpace(file, old []string) int {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	want := make([]string, len(old))
	for i, l := range old {
		want[i] = norm(l)
	}
	if strings.Join(want, "") == "" {
		return -1
	}
	found := -1
	for i := 0; i+len(want) <= len(file); i++ {
		ok := true
		for j := range want {
			if norm(file[i+j]) != want[j] {
				ok = false
				break
			}
		}
		if ok {
			if found >= 0 {
				return -1
			}
			found = i
		}
	}
	return found
}

// closestLines returns up to n line indexes whose text is most like old's
// first non-blank line (Dice coefficient over byte bigrams), best first,
// leaving out poor matches. Big files are skipped: the hint is not worth
// the time there.
func closestLines(file, old []string, n int) []int {
	var probe string
	for _, l := range old {
		if strings.TrimSpace(l) != "" {
			probe = strings.TrimSpace(l)
			break
		}
	}
	if len(probe) < 4 || len(file) > 50000 {
		return nil
	}
	want := bigrams(probe)
	type scored struct {
		i     int
		score float64
	}
	var best []scored
	for i, l := range file {
		l = strings.TrimSpace(l)
		if len(l) < 2 || len(l) > 4*len(probe)+20 {
			continue
		}
		have := bigrams(l)
		shared, total := 0, 0
		for k, c := range want {
			shared += min(c, have[k])
			total += c
		}
		for _, c := range have {
			total += c
		}
		score := 2 * float64(shared) / float64(total)
		if score >= 0.5 {
			best = append(best, scored{i, score})
		}
	}
	slices.SortStableFunc(best, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return a.i - b.i
	})
	var out []int
	for _, s := range best[:min(n, len(best))] {
		out = append(out, s.i)
	}
	return out
}

func bigrams(s string) map[uint16]int {
	m := make(map[uint16]int, len(s))
	for i := 0; i+1 < len(s); i++ {
		m[uint16(s[i])<<8|uint16(s[i+1])]++
	}
	return m
}
