// Package console is the terminal adapter: a chat with the agent in a
// terminal, on the same dispatcher, loop and renderer as Slack and
// Telegram. It streams the answer's text, prints one line per tool call
// (the lines a progress message lists) and a summary, and takes the chat
// commands with a slash (/help, /stop…). When its input is not a terminal
// it reads one message per line and answers each in turn, so it can be
// scripted.
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

	"github.com/firstmate/firstmate/adapters"
	"github.com/firstmate/firstmate/agent"
)

// Key is the console's one session.
var Key = agent.SessionKey{Platform: "console", Chat: "local"}

// Submitter is the part of the dispatcher the console drives.
type Submitter interface {
	Submit(ctx context.Context, in agent.Inbound) error
	Decide(ctx context.Context, d agent.Decision) (agent.Decided, error)
	Stop(key agent.SessionKey) bool
	WaitIdle(ctx context.Context, key agent.SessionKey) error
}

// Console is the terminal: the agent.Platform of the "console" session, and
// the surface the shared renderer shows its turns on. A terminal cannot
// edit what it printed, so progress is a line per finished tool call (the
// same lines a progress message lists) and a summary after the answer; the
// answer streams as the model writes it.
type Console struct {
	render *adapters.Renderer

	// asks carries the approval questions turns ended with to Run, which
	// owns the input: the next line typed answers the newest.
	asks chan string

	mu        sync.Mutex
	out       io.Writer
	midLine   bool // streamed text left the cursor mid-line
	afterStep bool // the last line printed was a step: the text's paragraph break is not needed
	color     bool
	failures  int // turns that ended in a failure, and messages that could not be sent
}

// Failures counts the turns that failed (the model could not be reached,
// a limit ended them, …) and the messages that could not be sent, so that
// a scripted chat can end with a failing status.
func (c *Console) Failures() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failures
}

// New returns a console that writes to out; color adds ANSI dim/green/red.
func New(out io.Writer, color bool, mode adapters.Mode) *Console {
	c := &Console{out: out, color: color, asks: make(chan string, 8)}
	c.render = adapters.NewRenderer(mode, nil)
	return c
}

// Thread implements agent.Platform: a terminal has one thread.
func (c *Console) Thread(agent.SessionKey, agent.Inbound) agent.Thread {
	return asking{c.render.Thread(c), c}
}

// asking is the console's thread: the renderer's, and a turn that ends
// with an approval question hands it to Run, whose next line answers it.
type asking struct {
	agent.Thread
	c *Console
}

func (a asking) Emit(ctx context.Context, ev agent.Event) error {
	err := a.Thread.Emit(ctx, ev)
	if q, ok := ev.(agent.ApprovalNeeded); ok && q.ID != "" {
		select {
		case a.c.asks <- q.ID:
		default: // Run is not reading: the question stays open, as on a platform
		}
	}
	return err
}

func (a asking) Close() error {
	if c, ok := a.Thread.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// AnswersTyped implements adapters.TypedAnswers: the person types y or n.
func (c *Console) AnswersTyped() {}

// Drain waits until every turn has printed what it still had to (its
// summary line), or ctx ends.
func (c *Console) Drain(ctx context.Context) { c.render.Close(ctx) }

// Pace: a terminal has no limits; text streams as it comes.
func (c *Console) Pace() adapters.Pace { return adapters.Pace{} }

// Format keeps the text as it is: a terminal shows Markdown as written.
func (c *Console) Format(t adapters.Text) []adapters.Part {
	p := adapters.Part{Text: t.Body}
	if t.Failure {
		p.Markup = markupFailure
	}
	return []adapters.Part{p}
}

// markupFailure marks a failure, painted red.
const markupFailure = "failure"

// Post prints a message on its own line.
func (c *Console) Post(_ context.Context, p adapters.Part) (adapters.MessageID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.newline()
	text := p.Text
	if p.Markup == markupFailure {
		text = c.paint("31", text)
		c.failures++
	}
	_, err := io.WriteString(c.out, strings.TrimRight(text, "\n")+"\n")
	c.afterStep = false
	return "", err
}

// Edit and Delete: what a terminal printed stays.
func (c *Console) Edit(context.Context, adapters.MessageID, adapters.Part) error {
	return adapters.ErrUnsupported
}

func (c *Console) Delete(context.Context, adapters.MessageID) error { return adapters.ErrUnsupported }

// Step prints a finished tool call's line, or the turn's summary.
func (c *Console) Step(_ context.Context, line string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.newline()
	switch {
	case strings.HasPrefix(line, "✓"):
		line = c.paint("32", "✓") + line[len("✓"):]
	case strings.HasPrefix(line, "✗"):
		line = c.paint("31", "✗") + line[len("✗"):]
	default:
		line = c.paint("2", "("+line+")")
	}
	_, err := io.WriteString(c.out, "  "+line+"\n")
	c.afterStep = true
	return err
}

// Stream prints the answer as it is written.
func (c *Console) Stream(_ context.Context, md string) (adapters.Stream, error) {
	return stream{c}, c.write(md)
}

type stream struct{ c *Console }

func (s stream) Append(_ context.Context, md string) error { return s.c.write(md) }

func (s stream) Stop(_ context.Context, md string) error {
	if err := s.c.write(md); err != nil {
		return err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.newline()
	return nil
}

func (c *Console) write(text string) error {
	if text == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.afterStep {
		// The step lines stand between two paragraphs already.
		text = strings.TrimLeft(text, "\n")
		if text == "" {
			return nil
		}
		c.afterStep = false
	}
	_, err := io.WriteString(c.out, text)
	c.midLine = !strings.HasSuffix(text, "\n")
	return err
}

// Upload names the file: it is already in the workspace, where the person
// can open it.
func (c *Console) Upload(_ context.Context, f agent.Attachment) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.newline()
	_, err := fmt.Fprintf(c.out, "  attached: %s\n", f.Path)
	return err
}

// CommandList names the chat commands as the terminal takes them, from
// the registry: "/help, /status, /stop, /reset".
func CommandList() string {
	var names []string
	for _, c := range agent.Commands() {
		names = append(names, "/"+c.Name)
	}
	return strings.Join(names, ", ")
}

// say prints a line of the chat's own (not a turn's).
func (c *Console) say(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.newline()
	fmt.Fprintln(c.out, text)
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

// Options configure a chat session.
type Options struct {
	In          io.Reader
	Interactive bool             // a person at a terminal: prompt, allow /stop mid-turn
	Interrupts  <-chan os.Signal // Ctrl-C: the first stops the turn, a second exits
	User        agent.User
	// Echo prints each message read as "> text" before its answer, so that
	// the output of scripted input reads as a conversation (a terminal
	// shows what was typed already).
	Echo bool
}

// Run chats until the input ends, /quit, or a second interrupt. In
// interactive mode lines typed during a turn are sent at once (so /stop
// works); otherwise each line waits for the previous turn to finish. In
// both, an interrupt during a turn stops it.
//
// The line reader blocks in Read and cannot be interrupted; when Run returns
// early it is left to end with its input (the process exits with it).
func (c *Console) Run(ctx context.Context, d Submitter, opt Options) error {
	if opt.User.ID == "" {
		opt.User = agent.User{ID: "operator"} // the person at the terminal
	}
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
	question := ""   // the approval the next line answers
	resumed := false // a decision was made since the running wait began
	waitIdle := func() {
		if busy {
			return
		}
		busy = true
		go func() {
			err := d.WaitIdle(ctx, Key)
			if err == nil {
				// The turn's summary line comes before the prompt.
				err = c.render.Wait(ctx)
			}
			idle <- err
		}()
	}
	decide := func(id string, yes bool) {
		if _, err := d.Decide(ctx, agent.Decision{ApprovalID: id, Chat: Key, User: opt.User, Approve: yes}); err != nil {
			c.say("could not record the decision: " + err.Error())
			return
		}
		// The decision resumes the turn: wait for it, even if the wait
		// running now ends first (it began before the resume was queued).
		resumed = true
		waitIdle()
	}
	ask := func(id string) {
		if !opt.Interactive {
			// Nobody at the terminal can answer a script's question.
			c.say("  (no one is at the terminal to approve it: denied)")
			decide(id, false)
			return
		}
		question = id
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
				c.say("(stopping; press Ctrl-C again to quit)")
				continue
			}
			return nil
		case id := <-c.asks:
			ask(id)
		case err := <-idle:
			busy = false
			if err != nil {
				return err
			}
			if resumed {
				resumed = false
				waitIdle()
				continue
			}
			// A question the turn ended with may not have been read yet.
			select {
			case id := <-c.asks:
				ask(id)
			default:
			}
			if question != "" {
				c.mu.Lock()
				c.newline()
				io.WriteString(c.out, "  ? approve it [y/N] ")
				c.mu.Unlock()
				continue
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
			if question != "" && !busy {
				yes := strings.EqualFold(strings.TrimSpace(line), "y") || strings.EqualFold(strings.TrimSpace(line), "yes")
				id := question
				question = ""
				decide(id, yes)
				continue
			}
			text := strings.TrimSpace(line)
			if text == "" {
				if !busy {
					prompt()
				}
				continue
			}
			if opt.Echo {
				c.say("> " + text)
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
				c.say("could not send: " + err.Error())
				c.mu.Lock()
				c.failures++
				c.mu.Unlock()
				continue
			}
			waitIdle()
		}
	}
}
