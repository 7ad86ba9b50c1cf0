package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// readyTimeout bounds the start of replicas run here.
const readyTimeout = 60 * time.Second

// runner is one run's state, phase after phase.
type runner struct {
	cfg *config
	log io.Writer

	work     string // temporary: logs, the data dir, a private Redis
	redisURL string
	prefix   string // of this run's Redis keys
	rc       *goredis.Client
	redisPID int // when Redis runs on this machine, for its CPU

	track *tracker
	plat  platform
	mdl   *model
	llm   *front    // the fake model, behind a front that counts connections
	held  *inFlight // its calls being answered
	reps  []*replica

	idle statsDelta // Redis while the replicas idle
	rep  *Report

	cleanups []func() // undone in reverse by close
}

// run does a whole run: fakes, Redis, replicas, the idle measurement, the
// idle sessions, the load and the report. Progress goes to log. On an
// error after the load started, the report so far is returned with it.
func run(ctx context.Context, cfg *config, log io.Writer) (*Report, error) {
	r := &runner{cfg: cfg, log: log}
	defer r.close()
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	if cfg.IdleSessions > 0 && cfg.IdleVia == "store" {
		if err := r.seedIdle(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.startReplicas(ctx); err != nil {
		return nil, err
	}
	if err := r.measureIdle(ctx); err != nil {
		return nil, err
	}
	if cfg.IdleSessions > 0 && cfg.IdleVia == "messages" {
		if err := r.idleByMessages(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.Messages == 0 {
		return r.rep, nil
	}
	err := r.load(ctx)
	for _, rp := range r.reps {
		if exit := rp.exited(); exit != nil {
			err = errors.Join(err, exit)
		}
	}
	return r.rep, err
}

func (r *runner) say(format string, args ...any) { fmt.Fprintf(r.log, format+"\n", args...) }

// later registers what close undoes.
func (r *runner) later(f func()) { r.cleanups = append(r.cleanups, f) }

// close stops what the run started, the replicas first.
func (r *runner) close() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

// setUp makes the work directory, connects to Redis (or starts one) and
// starts the fakes.
func (r *runner) setUp(ctx context.Context) error {
	cfg := r.cfg
	var err error
	if r.work, err = os.MkdirTemp("", "firstmate-load-"); err != nil {
		return err
	}
	r.later(func() {
		if cfg.Keep {
			r.say("kept %s", r.work)
			return
		}
		os.RemoveAll(r.work)
	})

	r.redisURL = cfg.Redis
	if cfg.PrivateRedis {
		pr, err := startPrivateRedis(ctx, r.work)
		if err != nil {
			return err
		}
		r.later(pr.stop)
		r.redisURL = pr.url
	}
	opt, err := goredis.ParseURL(r.redisURL)
	if err != nil {
		return fmt.Errorf("-redis: %w", err)
	}
	r.rc = goredis.NewClient(opt)
	r.later(func() { r.rc.Close() })
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = r.rc.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("redis at %s does not answer: %w", opt.Addr, err)
	}
	r.prefix = fmt.Sprintf("fmload-%d-%d", os.Getpid(), time.Now().UnixNano())
	if !cfg.Keep {
		r.later(func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := deletePrefix(cctx, r.rc, r.prefix); err != nil {
				r.say("removing the keys %s:*: %v", r.prefix, err)
			}
		})
	}
	r.redisPID = serverPID(ctx, r.rc, opt.Addr)

	r.track = newTracker()
	switch cfg.Platform {
	case "slack":
		people := cfg.Sessions
		if cfg.IdleVia == "messages" {
			people += cfg.IdleSessions
		}
		r.plat = newSlack(r.track, people)
	case "telegram":
		r.plat = newTelegram(r.track)
	}
	r.later(r.plat.Close)
	r.mdl = &model{tools: cfg.Tools, latency: cfg.ModelLatency}
	llm := fakellm.New(nil, fakellm.WithHandler(r.mdl.reply), fakellm.WithChunkSize(cfg.Chunk), fakellm.WithoutRecording())
	r.later(llm.Close)
	r.held = &inFlight{next: llm}
	r.llm = newFront(r.held)
	r.later(r.llm.Close)

	r.rep = &Report{
		Platform: cfg.Platform, Replicas: cfg.Replicas, Sessions: cfg.Sessions, Messages: cfg.Messages,
		ModelDelayMS: ms(cfg.ModelLatency), ToolsPerTurn: cfg.Tools, CPUs: runtime.NumCPU(),
		Mode: fmt.Sprintf("as fast as answered, %d in flight a session", cfg.Window),
	}
	if cfg.Think > 0 {
		r.rep.Mode += fmt.Sprintf(", %s pause after an answer", cfg.Think)
	}
	if cfg.Rate > 0 {
		r.rep.Mode = fmt.Sprintf("%g messages/s", cfg.Rate)
	}
	r.rep.Redis.Private = cfg.PrivateRedis
	if !cfg.PrivateRedis {
		r.rep.Notes = append(r.rep.Notes, "Redis is shared: its counts include any other client's commands (use -private-redis)")
	}
	return nil
}

// seedIdle writes the idle sessions into Redis, before any replica starts.
func (r *runner) seedIdle(ctx context.Context) error {
	n := r.cfg.IdleSessions
	r.say("writing %d idle sessions into Redis…", n)
	start := time.Now()
	// People after the load's.
	key := func(i int) agent.SessionKey { return r.plat.Key(r.cfg.Sessions + i) }
	if err := seedSessions(ctx, r.redisURL, r.prefix, n, key); err != nil {
		return err
	}
	r.rep.IdleSessions = &IdleReport{Sessions: n, Via: "store", Took: time.Since(start).Seconds()}
	return nil
}

// startReplicas starts the replicas (or prints how to, with -no-start) and
// waits until each is ready and the platform sees them.
func (r *runner) startReplicas(ctx context.Context) error {
	cfg := r.cfg
	base := []string{
		"OPENAI_BASE_URL=" + r.llm.URL + "/v1", "OPENAI_API_KEY=fake", "FIRSTMATE_MODEL=fake-model",
		"REDIS_URL=" + r.redisURL, "FIRSTMATE_REDIS_PREFIX=" + r.prefix,
		// The load is a few people sending many messages.
		"FIRSTMATE_USER_MESSAGES_PER_MINUTE=0",
	}
	dataDir := cfg.DataDir
	if dataDir == "" {
		dataDir = filepath.Join(r.work, "data")
	}
	base = append(base, "FIRSTMATE_DATA_DIR="+dataDir)
	base = append(base, r.plat.Env()...)
	if cfg.LogLevel != "" {
		base = append(base, "FIRSTMATE_LOG_LEVEL="+cfg.LogLevel)
	}
	var err error
	if r.reps, err = newReplicas(cfg.Replicas, base, cfg.Env); err != nil {
		return err
	}
	wait := readyTimeout
	if cfg.NoStart {
		wait = cfg.Timeout // a person starts them
		printEnv(r.log, r.reps)
		for i, pid := range cfg.PIDs {
			r.reps[i].pid = pid
		}
	} else {
		bin := cfg.Firstmate
		if bin == "" {
			if bin, err = buildFirstmate(ctx, r.work, r.log); err != nil {
				return err
			}
		}
		for _, rp := range r.reps {
			if err := rp.start(bin, r.work); err != nil {
				return err
			}
			r.later(func() {
				if err := rp.stop(); err != nil {
					r.say("replica %s: %v\n%s", rp.name, err, rp.tail())
				}
			})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	r.say("waiting for %d replica(s)…", len(r.reps))
	for _, rp := range r.reps {
		if err := rp.waitReady(ctx); err != nil {
			return err
		}
		if rp.pid == 0 {
			// Started by hand: the process that listens on its address.
			if rp.pid = listenerPID(rp.addr); rp.pid == 0 {
				r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("replica %s: its process is not found on this machine (give -pids): no RSS or CPU", rp.name))
			}
		}
	}
	need := len(r.reps)
	if cfg.Platform == "telegram" {
		need = 1 // one replica polls at a time
	}
	return waitReached(ctx, r.plat, need)
}

// measureIdle lets the replicas idle, then reads what Redis did meanwhile
// and each replica's memory.
func (r *runner) measureIdle(ctx context.Context) error {
	r.say("idle for %s…", r.cfg.Idle)
	before, err := readStats(ctx, r.rc)
	if err != nil {
		return fmt.Errorf("redis INFO: %w", err)
	}
	if !sleep(ctx, r.cfg.Idle) {
		return context.Cause(ctx)
	}
	after, err := readStats(ctx, r.rc)
	if err != nil {
		return fmt.Errorf("redis INFO: %w", err)
	}
	r.idle = after.since(before)
	rep := r.rep
	rep.Redis.IdleCommandsPerS = float64(r.idle.total()) / r.idle.took.Seconds()
	rep.Redis.IdleRoundTripsPS = float64(r.idle.reads) / r.idle.took.Seconds()
	rep.Replica = make([]ReplicaReport, len(r.reps))
	for i, rp := range r.reps {
		rt := rp.readRuntime()
		rep.Replica[i] = ReplicaReport{Name: rp.name, PID: rp.pid, IdleGoroutines: rt.goroutines, IdleHeapMB: rt.heapMB}
		if rp.pid == 0 {
			continue
		}
		m, err := readMem(rp.pid)
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("replica %s: %v", rp.name, err))
			continue
		}
		rep.Replica[i].IdleRSSMB, rep.Replica[i].IdleAnonMB, rep.Replica[i].IdleFileMB = m.RSS, m.Anon, m.File
	}
	if ir := rep.IdleSessions; ir != nil {
		for _, rp := range rep.Replica {
			ir.RSSMB = append(ir.RSSMB, rp.IdleRSSMB)
			ir.HeapMB = append(ir.HeapMB, rp.IdleHeapMB)
			ir.Routines = append(ir.Routines, rp.IdleGoroutines)
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("the idle RSS is with the %d idle sessions in Redis", ir.Sessions))
	}
	return nil
}

// idleByMessages has K people send one message each, waits for the
// answers and the settle, and reads the replicas' memory.
func (r *runner) idleByMessages(ctx context.Context) error {
	n := r.cfg.IdleSessions
	r.say("%d people send one message each…", n)
	start := time.Now()
	ph := &phase{plat: r.plat, track: r.track, first: r.cfg.Sessions, sessions: n, messages: n,
		dup: func(int) bool { return false }, window: 1, timeout: r.cfg.Timeout, stall: r.cfg.Stall}
	if err := ph.run(ctx); err != nil {
		return err
	}
	took := time.Since(start)
	o := r.track.summarize(0)
	if !sleep(ctx, r.cfg.Settle) {
		return context.Cause(ctx)
	}
	ir := &IdleReport{Sessions: n, Via: "messages", Took: took.Seconds()}
	for _, rp := range r.reps {
		var mb float64
		if rp.pid != 0 {
			m, _ := readMem(rp.pid)
			mb = m.RSS
		}
		rt := rp.readRuntime()
		ir.RSSMB = append(ir.RSSMB, mb)
		ir.HeapMB = append(ir.HeapMB, rt.heapMB)
		ir.Routines = append(ir.Routines, rt.goroutines)
	}
	r.rep.IdleSessions = ir
	if o.lost > 0 {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("%d of the %d idle sessions' messages got no answer", o.lost, n))
	}
	r.track.reset()
	return nil
}

// load sends the messages, waits for the answers and the settle, and fills
// in the report.
func (r *runner) load(ctx context.Context) error {
	cfg, rep := r.cfg, r.rep
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0))
	dups := make([]bool, cfg.Messages)
	for i := range dups {
		if dups[i] = rng.Float64() < cfg.Dup; dups[i] {
			rep.Duplicated++
		}
	}
	ph := &phase{plat: r.plat, track: r.track, sessions: cfg.Sessions, messages: cfg.Messages,
		dup: func(i int) bool { return dups[i] }, rate: cfg.Rate, window: cfg.Window, think: cfg.Think,
		timeout: cfg.Timeout, stall: cfg.Stall}
	r.plat.ResetCalls()
	retries0 := r.plat.Retries()
	turns0, requests0 := r.mdl.answers.Load(), r.mdl.requests.Load()
	modelConns0, apiConns0 := r.llm.conns.Load(), r.plat.Conns()
	cpu0 := cpuTimes(r.reps, r.redisPID)
	load0, err := readStats(ctx, r.rc)
	if err != nil {
		return fmt.Errorf("redis INFO: %w", err)
	}

	r.say("sending %d messages over %d sessions…", cfg.Messages, cfg.Sessions)
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan holdSample, 1)
	go func() { sampled <- r.sampleHeld(sctx) }()
	loadErr := ph.run(ctx)
	stopSampling()
	held := <-sampled
	turns := r.mdl.answers.Load() - turns0
	requests := r.mdl.requests.Load() - requests0
	cpuMid := cpuTimes(r.reps, r.redisPID)
	// Late duplicates and the turns' last calls come in the settle.
	if loadErr == nil && !sleep(ctx, cfg.Settle) {
		loadErr = context.Cause(ctx)
	}
	load1, err := readStats(ctx, r.rc)
	if err != nil && loadErr == nil {
		loadErr = fmt.Errorf("redis INFO: %w", err)
	}
	cpu1 := cpuTimes(r.reps, r.redisPID)
	o := r.track.summarize(r.mdl.perTurn())

	rep.Answered, rep.Lost, rep.AnsweredTwice, rep.OutOfOrder = o.answered, o.lost, o.twice, o.outOfOrder
	rep.Examples = Examples{Lost: o.lostIDs, Twice: o.twiceIDs, OutOfOrder: o.disorderIDs, Slowest: o.slowest}
	rep.Redelivered = r.plat.Retries() - retries0
	rep.Turns = turns
	rep.LatencyMS = percentiles(o.latencies)
	if !o.last.IsZero() {
		d := o.last.Sub(o.first)
		rep.DurationS = d.Seconds()
		if d > 0 {
			rep.TurnsPerS = float64(turns) / d.Seconds()
			rep.AnsweredPerS = float64(o.answered) / d.Seconds()
		}
	}
	rep.SteadyAnsweredPerS = o.steady
	if turns > 0 {
		n := float64(turns)
		rep.ModelCallsTurn = float64(requests) / n
		d := load1.since(load0)
		// Less the background the replicas make when idle, for as long.
		bg := d.took.Seconds() / r.idle.took.Seconds()
		rep.Redis.CommandsPerTurn = (float64(d.total()) - bg*float64(r.idle.total())) / n
		rep.Redis.RoundTripsPerTurn = (float64(d.reads) - bg*float64(r.idle.reads)) / n
		rep.Redis.ByCommand = map[string]float64{}
		for cmd, c := range d.commands {
			if cmd == "info" {
				continue // ours
			}
			rep.Redis.ByCommand[cmd] = (float64(c) - bg*float64(r.idle.commands[cmd])) / n
		}
		rep.Conns = ConnReport{
			ModelPerTurn: float64(r.llm.conns.Load()-modelConns0) / n,
			APIPerTurn:   float64(r.plat.Conns()-apiConns0) / n,
		}
		rep.PlatformCalls = map[string]float64{}
		for m, c := range r.plat.Calls() {
			rep.PlatformCalls[m] = float64(c) / n
		}
		rep.CPU = CPUReport{
			Replicas: (cpuMid.replicas - cpu0.replicas).Seconds(), Redis: (cpuMid.redis - cpu0.redis).Seconds(),
			Generator: (cpuMid.self - cpu0.self).Seconds(),
		}
		rep.CPU.PerTurnMS = rep.CPU.Replicas * 1000 / n
	}
	if held.turns > 0 {
		var idle float64
		for _, rp := range rep.Replica {
			idle += rp.IdleRSSMB
		}
		rep.Held = HeldReport{Turns: held.turns, RSSMB: held.rssMB,
			PerTurnKB: max(held.rssMB-idle, 0) * 1024 / float64(held.turns)}
	}
	for i, rp := range r.reps {
		rt := rp.readRuntime()
		rep.Replica[i].LoadGoroutines, rep.Replica[i].LoadHeapMB = rt.goroutines, rt.heapMB
		if rp.pid == 0 {
			continue
		}
		if m, err := readMem(rp.pid); err == nil {
			rep.Replica[i].LoadRSSMB, rep.Replica[i].PeakRSSMB = m.RSS, m.HWM
		}
		rep.Replica[i].CPUS = (cpuMid.each[i] - cpu0.each[i]).Seconds()
		rep.Replica[i].SettleCPU = (cpu1.each[i] - cpuMid.each[i]).Seconds()
	}
	if o.lost > 0 {
		rep.Notes = append(rep.Notes, "lost messages: see the replicas' logs (-keep keeps them)")
	}
	return loadErr
}

// printEnv prints, for -no-start, how to run each replica.
func printEnv(w io.Writer, reps []*replica) {
	fmt.Fprintf(w, "Run %d replica(s) by hand, each with its own environment (a clean one is best: env -i …):\n", len(reps))
	for _, r := range reps {
		var quoted []string
		for _, kv := range r.env {
			k, v, _ := strings.Cut(kv, "=")
			quoted = append(quoted, k+"='"+strings.ReplaceAll(v, "'", `'\''`)+"'")
		}
		fmt.Fprintf(w, "\n  env %s firstmate serve\n", strings.Join(quoted, " "))
	}
	fmt.Fprintln(w)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// serverPID is the Redis server's process ID when it runs on this
// machine, for its CPU time; 0 otherwise.
func serverPID(ctx context.Context, rc *goredis.Client, addr string) int {
	host, _, _ := strings.Cut(addr, ":")
	if host != "127.0.0.1" && host != "localhost" && host != "::1" {
		return 0
	}
	info, err := rc.Info(ctx, "server").Result()
	if err != nil {
		return 0
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, _ := strconv.Atoi(strings.TrimSpace(v))
			if _, err := cpuTime(pid); err == nil {
				return pid
			}
		}
	}
	return 0
}

// cpuSnapshot is the CPU time used so far by the replicas, Redis and this
// process.
type cpuSnapshot struct {
	each        []time.Duration
	replicas    time.Duration
	redis, self time.Duration
}

func cpuTimes(reps []*replica, redisPID int) cpuSnapshot {
	var s cpuSnapshot
	for _, r := range reps {
		var d time.Duration
		if r.pid != 0 {
			d, _ = cpuTime(r.pid)
		}
		s.each = append(s.each, d)
		s.replicas += d
	}
	if redisPID != 0 {
		s.redis, _ = cpuTime(redisPID)
	}
	s.self, _ = cpuTime(os.Getpid())
	return s
}
