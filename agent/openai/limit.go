package openai

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/firstmate/firstmate/agent"
)

// Limits on what the server sends. A misbehaving server once streamed one
// tool call's arguments without end and took the process from 121 MB to
// 4.7 GB in 48 s. So every byte is counted where it is read, and a call
// that passes a limit stops reading at once and closes the connection:
//
//   - the reply (text and tool calls, what is kept): Config.MaxResponseBytes,
//     counted in Model.attempt;
//   - the stream as a whole: streamFactor times that. Each event repeats an
//     envelope of ~200 bytes around a few characters of text, and reasoning
//     that is not kept still arrives, so the stream is much larger than the
//     reply; this cap ends a stream of events that carry nothing;
//   - one line of the stream, and the lines that are not "data:" events
//     (comments, a JSON body from a server that ignores streaming), together:
//     heldFactor times it. go-openai reads a line whole however long it is,
//     and keeps every line that is not an event in a buffer it never empties;
//   - a body that is not a stream (the model list): heldFactor times it;
//   - an error response's body is cut at errorBodyMax: its status says what
//     matters, and only its first 200 characters are shown.
const (
	streamFactor = 64
	heldFactor   = 4
	errorBodyMax = 64 << 10
	// callOverhead is what a new tool call counts against the reply limit
	// beyond its bytes: it costs memory even with no arguments, and a server
	// could send calls without end.
	callOverhead = 256
)

var (
	// ErrTooLarge is matched (errors.Is) by the error of a call whose reply,
	// stream or body passed its limit (see [Config.MaxResponseBytes]). It is
	// not retried: the same request would most likely do it again, at the
	// cost of the whole limit each time.
	ErrTooLarge = agent.ErrModelTooLarge
	// ErrStalled is matched by the error of a call whose stream paused for
	// longer than [Config.StallTimeout] after its output had begun.
	ErrStalled = agent.ErrModelStalled
)

// limitError is a response that passed a limit.
type limitError struct {
	limit int    // Config.MaxResponseBytes
	what  string // where it passed, for people: " in its text", ": …"
}

func (e *limitError) Error() string {
	return fmt.Sprintf("the model's response passed the %s limit (llm.max_response_kb)%s", formatSize(int64(e.limit)), e.what)
}

func (e *limitError) Is(target error) bool { return target == ErrTooLarge }

// stallError is the cause of an attempt whose stream stalled.
type stallError struct{ after time.Duration }

func (e *stallError) Error() string {
	return fmt.Sprintf("the model's stream stalled: no data for %s (llm.stall_timeout)", shortDuration(e.after))
}

func (e *stallError) Is(target error) bool { return target == ErrStalled }

// replyTooLarge is the error of a reply that passed limit in its text
// (call nil), or at call, the nth, which the last delta started if
// started.
func replyTooLarge(limit int, call *partialCall, started bool, n int) *limitError {
	const dropped = ", so the reply was dropped"
	switch {
	case call == nil:
		return &limitError{limit, " in its text" + dropped}
	case started && call.args.Len() < callOverhead:
		// Not its arguments: one call too many.
		return &limitError{limit, fmt.Sprintf(" in its tool calls (%d of them)%s", n, dropped)}
	case call.name == "":
		return &limitError{limit, " in the arguments of a tool call" + dropped}
	}
	name := call.name
	if len(name) > 64 {
		name = strings.ToValidUTF8(name[:64], "") + "…"
	}
	return &limitError{limit, fmt.Sprintf(" in the arguments of its %q call%s", name, dropped)}
}

// bodyLimits caps one response body; a zero field is not checked.
type bodyLimits struct {
	total   int64 // every byte
	line    int64 // one line
	outside int64 // the lines that are not "data:" events, together
}

// limitBody wraps the body of resp, the answer to req, in the limits for
// a reply of at most maxReply bytes. An error noted by the body goes to
// rec.
func limitBody(req *http.Request, resp *http.Response, maxReply int, rec *record) io.ReadCloser {
	m := int64(maxReply)
	switch {
	case resp.StatusCode >= 400:
		return struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, errorBodyMax), resp.Body}
	case strings.Contains(req.Header.Get("Accept"), "text/event-stream"):
		return &limitedBody{rc: resp.Body, max: maxReply, rec: rec,
			lim: bodyLimits{total: streamFactor * m, line: heldFactor * m, outside: heldFactor * m}}
	default:
		return &limitedBody{rc: resp.Body, max: maxReply, rec: rec, lim: bodyLimits{total: heldFactor * m}}
	}
}

// limitedBody counts a body's bytes as they are read. Once a limit is
// passed, the read fails with a *limitError, the body is closed (which
// drops the connection rather than drain it) and the error is noted in the
// attempt's record, for go-openai may report another error in its place.
// The lines are classified here, a few bytes each, with no copy.
type limitedBody struct {
	rc  io.ReadCloser
	lim bodyLimits
	max int
	rec *record // nil outside an attempt

	n           int64 // bytes read
	line        int64 // bytes in the current line
	outsideDone int64 // bytes in finished lines that were not events
	head        [5]byte
	nhead       int // bytes of head filled, past leading blanks
	kind        lineKind
	err         error
}

type lineKind uint8

const (
	lineUnknown lineKind = iota
	lineData
	lineOther
)

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if lerr := b.count(p[:n]); lerr != nil {
		b.err = lerr
		b.rc.Close() // stop the transfer now, not when the caller gets to it
		if b.rec != nil && b.rec.tooLarge == nil {
			b.rec.tooLarge = lerr
		}
		return 0, lerr
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

func (b *limitedBody) count(p []byte) error {
	b.n += int64(len(p))
	if b.lim.total > 0 && b.n > b.lim.total {
		if b.lim.line == 0 {
			return &limitError{limit: b.max, what: fmt.Sprintf(": the server's answer ran past %s", formatSize(b.lim.total))}
		}
		return &limitError{limit: b.max, what: fmt.Sprintf(": its stream ran past %s (%d times the limit, room for the stream's framing) without ending",
			formatSize(b.lim.total), streamFactor)}
	}
	if b.lim.line == 0 {
		return nil
	}
	for len(p) > 0 {
		seg, rest, ended := bytes.Cut(p, []byte{'\n'})
		b.scan(seg)
		if b.lim.outside > 0 && b.outside() > b.lim.outside {
			return &limitError{limit: b.max, what: fmt.Sprintf(": more than %s arrived outside stream events (does the server support streaming?)",
				formatSize(b.lim.outside))}
		}
		if b.line > b.lim.line {
			return &limitError{limit: b.max, what: fmt.Sprintf(": one event of its stream ran past %s", formatSize(b.lim.line))}
		}
		if !ended {
			break
		}
		b.endLine()
		p = rest
	}
	return nil
}

// scan adds seg, a piece of the current line, and classifies the line by
// its first bytes past blanks, as go-openai does ("data:" or not).
func (b *limitedBody) scan(seg []byte) {
	b.line += int64(len(seg))
	for i := 0; b.kind == lineUnknown && i < len(seg); i++ {
		c := seg[i]
		if b.nhead == 0 && (c == ' ' || c == '\t' || c == '\r') {
			continue
		}
		b.head[b.nhead] = c
		b.nhead++
		if b.nhead == len(b.head) {
			b.kind = lineOther
			if string(b.head[:]) == "data:" {
				b.kind = lineData
			}
		}
	}
}

// outside is the bytes so far in lines that are not events.
func (b *limitedBody) outside() int64 {
	if b.kind == lineOther {
		return b.outsideDone + b.line
	}
	return b.outsideDone
}

func (b *limitedBody) endLine() {
	if b.kind == lineOther || (b.kind == lineUnknown && b.nhead > 0) {
		b.outsideDone += b.line
	}
	b.line, b.nhead, b.kind = 0, 0, lineUnknown
}

// formatSize writes n bytes as people write sizes: 1 MiB, 64 KiB.
func formatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// shortDuration writes d as people write it: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
