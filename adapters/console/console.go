// Package console is the terminal adapter: a chat with the agent in a
// terminal, on the same dispatcher and loop as Slack and Telegram. It
// streams the answer's text, prints one line per tool call with its summary
// and duration, and takes /help, /status, /stop and /reset. When its input
// is not a terminal it reads one message per line and answers each in turn,
// so it can be scripted.
package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/firstmate/firstmate/agent"
)

// Key is the console's one session.
var Key = agent.SessionKey{Platform: "console", Chat: "local"}

// Submitter is the part of the dispatcher the console drives.
type Submitter interface {
	Submit(ctx context.Context, in agent.Inbound) error
	Stop(key agent.SessionKey) bool
	WaitIdle(ctx context.Context, key agent.SessionKey) error
}

// Console renders one session's events on a writer. It is the
// agent.Platform and agent.Thread for the "console" platform.
type Console struct {
	// asks carries approval questions from turns to Run, which owns the
	// input; nil while no interactive Run is reading it.
	asks chan *ask

	mu      sync.Mutex
	asking  bool // an interactive Run reads answers
	out     io.Writer
	midLine bool // streamed text left the cursor mid-line
	streamd bool // the current turn streamed its answer
	color   bool
}

// New returns a console that writes to out; color adds ANSI dim/green/red.
func New(out io.Writer, color bool) *Console {
	return &Console{out: out, color: color, asks: make(chan *ask)}
}

// ask is one approval question waiting for a line of input.
type ask struct {
	req    agent.ApprovalNeeded
	answer chan bool // buffered: Run never blocks on a turn that gave up
}

// errNoOneToAsk is the answer when no person is at the terminal.
var errNoOneToAsk = errors.New("no one is at the terminal to approve it (the input is not a terminal)")

// Approve implements agent.Approver: an interactive chat asks the person at
// the terminal; the next line they type is the answer (y or yes approves).
// Scripted input cannot answer, so the call is refused with a reason.
func (c *Console) Approve(ctx context.Context, req agent.ApprovalNeeded) (bool, error) {
	c.mu.Lock()
	canAsk := c.asking
	c.mu.Unlock()
	if !canAsk {
		return false, errNoOneToAsk
	}
	a := &ask{req: req, answer: make(chan bool, 1)}
	select {
	case c.asks <- a:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	select {
	case ok := <-a.answer:
		return ok, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Thread implements agent.Platform: a terminal has one thread.
func (c *Console) Thread(agent.SessionKey, agent.Inbound) agent.Thread { return c }

// Emit implements agent.Thread.
func (c *Console) Emit(_ context.Context, ev agent.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	switch ev := ev.(type) {
	case agent.TurnStarted:
		c.streamd = false
	case agent.TextDelta:
		if ev.Text != "" {
			_, err = io.WriteString(c.out, ev.Text)
			c.midLine = !strings.HasSuffix(ev.Text, "\n")
			c.streamd = true
		}
	case agent.ToolStarted:
		// The line is written when the tool finishes, with its result.
	case agent.ToolFinished:
		c.newline()
		mark, paint := "✓", "32"
		if ev.Failed {
			mark, paint = "✗", "31"
		}
		_, err = fmt.Fprintf(c.out, "  %s %s %s %s\n", c.paint(paint, mark), ev.Name, ev.Summary, c.paint("2", formatDuration(ev.Duration)))
	case agent.ApprovalNeeded:
		// Approve asks the question; nothing to show twice.
	case agent.Answer:
		if !c.streamd && ev.Text != "" {
			c.newline()
			_, err = io.WriteString(c.out, ev.Text)
			c.midLine = !strings.HasSuffix(ev.Text, "\n")
		}
		c.newline()
		for _, f := range ev.Files {
			fmt.Fprintf(c.out, "  attached: %s\n", f.Path) // already in the workspace, where the person can open it
		}
		if ev.Tools > 0 {
			fmt.Fprintln(c.out, c.paint("2", fmt.Sprintf("  (%d tool call(s), %s)", ev.Tools, formatDuration(ev.Took))))
		}
	case agent.Failed:
		c.newline()
		_, err = fmt.Fprintf(c.out, "%s\n", c.paint("31", ev.Message))
	case agent.Notice:
		c.newline()
		_, err = fmt.Fprintln(c.out, ev.Text)
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func (c *Console) newline() {
	if c.midLine {
		io.WriteString(c.out, "\n")
		c.midLine = false
	}
}

func (c *Console) paint(code, s string) string {
	if !c.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func formatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}

// Options configure a chat session.
type Options struct {
	In          io.Reader
	Interactive bool             // a person at a terminal: prompt, allow /stop mid-turn
	Interrupts  <-chan os.Signal // Ctrl-C: the first stops the turn, a second exits
	User        agent.User
}

// Run chats until the input ends, /quit, or a second interrupt. In
// interactive mode lines typed during a turn are sent at once (so /stop
// works); otherwise each line waits for the previous turn to finish. In
// both, an interrupt during a turn stops it.
//
// The line reader blocks in Read and cannot be interrupted; when Run returns
// early it is left to end with its input (the process exits with it).
func (c *Console) Run(ctx context.Context, d Submitter, opt Options) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	go func() {
		sc := bufio.NewScanner(opt.In)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-readCtx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()

	epoch := time.Now().UnixNano()
	seq := 0
	busy := false
	idle := make(chan error, 1)
	prompt := func() {
		if opt.Interactive {
			c.mu.Lock()
			c.newline()
			io.WriteString(c.out, c.paint("1", "> "))
			c.mu.Unlock()
		}
	}
	prompt()
	var lastStop time.Time
	var inputDone bool
	var inputErr error
	var asking *ask // the approval the next line answers
	if opt.Interactive {
		c.mu.Lock()
		c.asking = true
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.asking = false
			c.mu.Unlock()
		}()
	}
	for {
		// Scripted input waits for each turn before the next line.
		in := lines
		if busy && !opt.Interactive {
			in = nil
		}
		if inputDone && !busy {
			return inputErr
		}
		eof := readErr
		if inputDone {
			eof = nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-opt.Interrupts:
			if busy && time.Since(lastStop) > 2*time.Second && d.Stop(Key) {
				lastStop = time.Now()
				c.Emit(ctx, agent.Notice{Text: "(stopping; press Ctrl-C again to quit)"})
				continue
			}
			return nil
		case a := <-c.asks:
			if asking != nil {
				asking.answer <- false // a newer question replaces it
			}
			asking = a
			c.mu.Lock()
			c.newline()
			fmt.Fprintf(c.out, "  ? allow %s %s? [y/N] ", a.req.Name, truncate(string(a.req.Args), 300))
			c.mu.Unlock()
		case err := <-idle:
			busy = false
			if asking != nil {
				asking.answer <- false
				asking = nil
			}
			if err != nil {
				return err
			}
			if !inputDone {
				prompt()
			}
		case err := <-eof:
			// End of input: finish the running turn, then leave.
			inputDone = true
			if err != nil {
				inputErr = fmt.Errorf("read input: %w", err)
			}
		case line := <-in:
			if asking != nil {
				yes := strings.EqualFold(strings.TrimSpace(line), "y") || strings.EqualFold(strings.TrimSpace(line), "yes")
				asking.answer <- yes
				asking = nil
				continue
			}
			text := strings.TrimSpace(line)
			if text == "" {
				if !busy {
					prompt()
				}
				continue
			}
			if text == "/quit" || text == "/exit" {
				return nil
			}
			seq++
			msg := agent.Inbound{
				Key: Key, MessageID: strconv.FormatInt(epoch, 36) + "-" + strconv.Itoa(seq),
				User: opt.User, Text: text, Addressed: true, Time: time.Now(),
			}
			if err := d.Submit(ctx, msg); err != nil {
				if errors.Is(err, context.Canceled) {
					return nil
				}
				c.Emit(ctx, agent.Notice{Text: "could not send: " + err.Error()})
				continue
			}
			if !busy {
				busy = true
				go func() { idle <- d.WaitIdle(ctx, Key) }()
			}
		}
	}
}
