// Command firstmate-load drives a firstmate deployment through the in-repo
// fakes and reports what an operator sizes it by: turns a second, the time
// from a message reaching the bot to its answer showing (less the model's
// own time), Redis commands and round trips per turn, messages lost,
// answered twice or out of order, and each replica's resident memory idle,
// after the load and with many idle sessions.
//
//	go run ./cmd/firstmate-load -platform slack -replicas 1 -sessions 1000 -messages 5000
//
// It starts a fake Slack (Socket Mode and the Web API, internal/testkit/fakeslack)
// or a fake Telegram (long polling, internal/testkit/faketelegram) and a fake
// OpenAI-compatible model (internal/testkit/fakellm) on loopback ports. The model
// answers each turn with -tools tool calls (ls) and then a short Markdown
// answer naming the messages it answers; every model reply takes
// -model-latency. Then it starts -replicas `firstmate serve` processes
// (-firstmate, or one built from this module) on the Redis at -redis (or a
// throwaway redis-server with -private-redis) under a fresh key prefix,
// with a shared data directory, open access and no per-person message
// limit. With -no-start it prints the environment to run them by hand and
// waits for them (their processes, for RSS and CPU, are found by their
// HTTP addresses, or given with -pids).
//
// Each session is one person's direct message (Slack DM, Telegram private
// chat). -messages are spread over -sessions round robin; -dup of them are
// delivered twice (the same Slack event, or the same Telegram message in a
// second update). Without -rate each session sends its next message as soon
// as fewer than -window of its messages wait for an answer (as fast as the
// deployment answers); with -rate messages go out at that many a second
// whatever comes back. -think is a person's pause after an answer before
// their next message.
//
// The answer to a message is the first bot message (a post, an edit, a
// stream or draft) that carries the message's token; it is answered twice
// when two distinct bot messages carry it, out of order when a later
// message of its session was answered first, and lost when no answer came
// before -timeout (or for -stall no answer came at all). Its latency runs
// from just before the fake hands it to the bot to the answer's first
// call. Redis figures are the deltas of INFO commandstats and
// total_reads_processed (one read is about one round trip, a pipeline
// included; a counting proxy agreed within 1%) over the load, less the
// background rate measured while idle; on a Redis other clients use they
// include theirs, so measure with -private-redis. The report also gives
// the platform calls and new TCP connections (to the model and the API)
// per turn, and the CPU time of the replicas, Redis and this process: all
// run on one machine, so the fakes' share is the machine's too.
//
// -idle-sessions K first makes K sessions with one finished turn each:
// written into Redis through store/redis before the replicas start
// (-idle-via store), or by K people sending one message each after the
// idle measurement (-idle-via messages). The report gives the RSS then.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOGC") == "" {
		// The fakes share the machine with the replicas they measure: this
		// process trades memory, which is not measured, for the CPU its
		// collector would take from them. (The replicas do not inherit
		// it: they start with an environment of their own.)
		debug.SetGCPercent(400)
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "firstmate-load: -cpuprofile:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	rep, err := run(ctx, cfg, os.Stderr)
	if rep != nil {
		if cfg.JSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(rep)
		} else {
			rep.WriteText(os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "firstmate-load:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// config is what a run is asked to do; the flags fill it.
type config struct {
	Platform  string // slack or telegram
	Firstmate string // the binary; empty builds one from this module
	Replicas  int
	NoStart   bool  // print the environment and wait for replicas run by hand
	PIDs      []int // with NoStart: the replicas' processes, for their RSS

	Redis        string // REDIS_URL
	PrivateRedis bool   // start a redis-server of our own instead
	DataDir      string // shared by the replicas; empty: a temporary one
	Keep         bool   // keep the Redis keys and the data directory
	Env          []string
	LogLevel     string

	Sessions int
	Messages int
	Dup      float64 // fraction of messages delivered twice
	Rate     float64 // messages a second; 0: closed loop, Window per session
	Window   int
	Think    time.Duration // without Rate: a person's pause after an answer

	ModelLatency time.Duration
	Tools        int // tool calls per turn
	Chunk        int // characters per streamed chunk of the model's answer

	Idle    time.Duration // idle time before the idle RSS is read
	Settle  time.Duration // after the last answer, before the after RSS
	Timeout time.Duration // the whole load
	Stall   time.Duration // no new answer for this long ends the wait

	IdleSessions int
	IdleVia      string // store or messages

	JSON       bool
	Seed       int64
	CPUProfile string // of this process: the fakes and the load
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("firstmate-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Platform, "platform", "slack", "the fake platform: slack (Socket Mode) or telegram (long polling)")
	fs.StringVar(&c.Firstmate, "firstmate", "", "the firstmate binary; empty builds ./cmd/firstmate of this module")
	fs.IntVar(&c.Replicas, "replicas", 1, "firstmate serve processes sharing Redis")
	fs.BoolVar(&c.NoStart, "no-start", false, "print the environment of each replica and wait for them to be started by hand")
	pids := fs.String("pids", "", "with -no-start: comma-separated PIDs of the replicas, for their RSS and CPU; by default the processes listening on their HTTP addresses")
	fs.StringVar(&c.Redis, "redis", "redis://127.0.0.1:6379/0", "REDIS_URL of the replicas")
	fs.BoolVar(&c.PrivateRedis, "private-redis", false, "start a throwaway redis-server (from PATH) instead of -redis, so that INFO counts only this run")
	fs.StringVar(&c.DataDir, "data-dir", "", "FIRSTMATE_DATA_DIR shared by the replicas; empty: a temporary directory")
	fs.BoolVar(&c.Keep, "keep", false, "keep the Redis keys and the data directory")
	fs.Func("env", "`KEY=VALUE` added to every replica's environment (repeatable; overrides the generator's)", func(v string) error {
		if !strings.Contains(v, "=") {
			return errors.New("want KEY=VALUE")
		}
		c.Env = append(c.Env, v)
		return nil
	})
	fs.StringVar(&c.LogLevel, "log-level", "", "FIRSTMATE_LOG_LEVEL of the replicas; empty: firstmate's default")
	fs.IntVar(&c.Sessions, "sessions", 100, "conversations (one person's DM each)")
	fs.IntVar(&c.Messages, "messages", 500, "messages sent in all, spread over the sessions round robin")
	fs.Float64Var(&c.Dup, "dup", 0, "fraction of messages delivered twice (0 to 1)")
	fs.Float64Var(&c.Rate, "rate", 0, "messages a second (open loop); 0 sends as fast as answers come back, -window per session")
	fs.IntVar(&c.Window, "window", 1, "without -rate: messages of one session waiting for an answer at once")
	fs.DurationVar(&c.Think, "think", 0, "without -rate: a person's pause between an answer and their next message")
	fs.DurationVar(&c.ModelLatency, "model-latency", 0, "time the fake model takes for every reply")
	fs.IntVar(&c.Tools, "tools", 1, "tool calls (ls) the model makes in each turn, before it answers")
	fs.IntVar(&c.Chunk, "chunk", 4, "characters per streamed chunk of the model's replies")
	fs.DurationVar(&c.Idle, "idle", 5*time.Second, "idle time after the replicas are ready, before the idle RSS is read")
	fs.DurationVar(&c.Settle, "settle", 3*time.Second, "wait after the last answer before the after-load RSS (late duplicates show here)")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "the most the load may take")
	fs.DurationVar(&c.Stall, "stall", 30*time.Second, "stop waiting when no answer came for this long")
	fs.IntVar(&c.IdleSessions, "idle-sessions", 0, "first make this many idle sessions and report the RSS with them")
	fs.StringVar(&c.IdleVia, "idle-via", "store", "how idle sessions are made: store (written into Redis before the replicas start) or messages (one message each, after the idle RSS)")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fs.Int64Var(&c.Seed, "seed", 1, "seed of the choice of duplicated messages")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of this process (the fakes and the load, not the replicas) to `file`")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "firstmate-load: unexpected arguments %q\n", fs.Args())
		return nil, errors.New("usage")
	}
	for p := range strings.SplitSeq(*pids, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			fmt.Fprintf(stderr, "firstmate-load: -pids: %q is not a process ID\n", p)
			return nil, errors.New("usage")
		}
		c.PIDs = append(c.PIDs, n)
	}
	if err := c.check(); err != nil {
		fmt.Fprintln(stderr, "firstmate-load:", err)
		return nil, err
	}
	return c, nil
}

// check refuses what cannot run.
func (c *config) check() error {
	switch {
	case c.Platform != "slack" && c.Platform != "telegram":
		return fmt.Errorf("-platform %q: want slack or telegram", c.Platform)
	case c.Replicas < 1:
		return errors.New("-replicas must be at least 1")
	case c.Sessions < 1 || c.Sessions > maxSessions:
		return fmt.Errorf("-sessions must be 1 to %d", maxSessions)
	case c.Messages < 0 || (c.Messages+c.Sessions-1)/c.Sessions > maxPerSession:
		return fmt.Errorf("-messages must be 0 to %d a session", maxPerSession)
	case c.Dup < 0 || c.Dup > 1:
		return errors.New("-dup is a fraction, 0 to 1")
	case c.Rate < 0:
		return errors.New("-rate must not be negative")
	case c.Window < 1:
		return errors.New("-window must be at least 1")
	case c.Think < 0:
		return errors.New("-think must not be negative")
	case c.Tools < 0:
		return errors.New("-tools must not be negative")
	case c.Chunk < 1:
		return errors.New("-chunk must be at least 1")
	case c.IdleSessions < 0 || c.IdleSessions > maxSessions:
		return fmt.Errorf("-idle-sessions must be 0 to %d", maxSessions)
	case c.IdleVia != "store" && c.IdleVia != "messages":
		return fmt.Errorf("-idle-via %q: want store or messages", c.IdleVia)
	case len(c.PIDs) > 0 && !c.NoStart:
		return errors.New("-pids goes with -no-start (started replicas are known)")
	case len(c.PIDs) > 0 && len(c.PIDs) != c.Replicas:
		return fmt.Errorf("-pids names %d processes for %d replicas", len(c.PIDs), c.Replicas)
	}
	return nil
}
