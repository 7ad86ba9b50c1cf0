package files

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// lineReader yields a file's lines without their "\n" or "\r\n", each cut
// to keep bytes, in bounded memory however long a line is.
type lineReader struct {
	br   *bufio.Reader
	keep int
	buf  []byte
}

func newLineReader(r io.Reader, keep int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), keep: keep}
}

// next returns the next line (valid until the following call), whether it
// was cut, and io.EOF after the last line. A final line without "\n"
// counts; an empty file has no lines.
func (lr *lineReader) next() (line []byte, cut bool, err error) {
	lr.buf = lr.buf[:0]
	total := 0
	for {
		chunk, err := lr.br.ReadSlice('\n')
		total += len(chunk)
		// Keep two bytes more than asked, so a line of exactly keep bytes
		// plus "\r\n" is not taken for a cut one.
		if room := lr.keep + 2 - len(lr.buf); room > 0 {
			lr.buf = append(lr.buf, chunk[:min(room, len(chunk))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && total == 0 {
			return nil, false, io.EOF
		}
		if err != nil && err != io.EOF {
			return nil, false, err
		}
		break
	}
	line = lr.buf
	if len(line) == total { // nothing dropped: the terminator is here
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
	}
	if len(line) > lr.keep {
		return cutUTF8(line, lr.keep), true, nil
	}
	return line, false, nil
}

// cutUTF8 cuts b to at most n bytes without splitting a character.
func cutUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}

// text makes a line safe to show: invalid UTF-8 becomes U+FFFD.
func text(b []byte) string {
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// countLines counts lines the way lineReader does.
func countLines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
