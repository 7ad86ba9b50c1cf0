package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is what a run measured. Its JSON is the -json output.
type Report struct {
	Platform     string  `json:"platform"`
	Replicas     int     `json:"replicas"`
	Sessions     int     `json:"sessions"`
	Messages     int     `json:"messages"`
	Duplicated   int     `json:"duplicated"` // messages delivered twice
	Mode         string  `json:"mode"`       // how messages were paced
	ModelDelayMS float64 `json:"model_latency_ms"`
	ToolsPerTurn int     `json:"tools_per_turn"`
	CPUs         int     `json:"cpus"` // of this machine, which runs everything

	DurationS    float64 `json:"duration_s"` // first message sent to last answer shown
	Turns        int64   `json:"turns"`      // answers the model gave
	TurnsPerS    float64 `json:"turns_per_s"`
	AnsweredPerS float64 `json:"answered_per_s"` // messages answered a second
	// SteadyAnsweredPerS leaves out the start and the drain: answers a
	// second between the 10th and the 90th percentile answer.
	SteadyAnsweredPerS float64 `json:"steady_answered_per_s"`
	ModelCallsTurn     float64 `json:"model_requests_per_turn"`

	// LatencyMS is from the platform handing a message to the bot to its
	// answer first showing, less the model's set time for the turn.
	LatencyMS Percentiles `json:"latency_ms"`

	Answered      int      `json:"answered"`
	Lost          int      `json:"lost"`
	AnsweredTwice int      `json:"answered_twice"`
	OutOfOrder    int      `json:"out_of_order"`
	Redelivered   int      `json:"platform_redeliveries"` // envelopes the fake sent again, unacked in time
	Examples      Examples `json:"examples,omitzero"`

	Redis         RedisReport        `json:"redis"`
	PlatformCalls map[string]float64 `json:"platform_calls_per_turn"`
	Conns         ConnReport         `json:"new_connections_per_turn"`
	CPU           CPUReport          `json:"cpu_s"`
	Held          HeldReport         `json:"held,omitzero"`
	Replica       []ReplicaReport    `json:"replica"`
	IdleSessions  *IdleReport        `json:"idle_sessions,omitempty"`
	Notes         []string           `json:"notes,omitempty"`
}

// Percentiles of a latency, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Examples are the first few messages of each kind of failure.
type Examples struct {
	Lost       []string `json:"lost,omitempty"`
	Twice      []string `json:"answered_twice,omitempty"`
	OutOfOrder []string `json:"out_of_order,omitempty"`
	Slowest    []string `json:"slowest,omitempty"` // with their latency
}

// RedisReport is Redis's work per turn over the load, less what the
// replicas do while idle (measured before the load, scaled to its length).
type RedisReport struct {
	Private           bool               `json:"private"` // a redis-server of this run's own
	CommandsPerTurn   float64            `json:"commands_per_turn"`
	RoundTripsPerTurn float64            `json:"round_trips_per_turn"` // read events (total_reads_processed)
	ByCommand         map[string]float64 `json:"by_command_per_turn"`
	IdleCommandsPerS  float64            `json:"idle_commands_per_s"`
	IdleRoundTripsPS  float64            `json:"idle_round_trips_per_s"`
}

// ConnReport is how many TCP connections the replicas opened a turn, to
// the model and to the platform's API: with keep-alive working, about none.
type ConnReport struct {
	ModelPerTurn float64 `json:"model"`
	APIPerTurn   float64 `json:"platform_api"`
}

// HeldReport is the moment of the load with the most turns waiting on the
// model at once (sampled every 100 ms), and what each cost in memory: the
// replicas' RSS then, less their idle RSS, over the turns.
type HeldReport struct {
	Turns     int64   `json:"turns"`
	RSSMB     float64 `json:"rss_mb"`
	PerTurnKB float64 `json:"per_turn_kb"`
}

// CPUReport is CPU time used during the load (to the last answer), in
// seconds.
type CPUReport struct {
	Replicas  float64 `json:"replicas"`
	Redis     float64 `json:"redis,omitempty"` // when the server runs on this machine
	Generator float64 `json:"generator"`       // this process: the fakes and the load
	PerTurnMS float64 `json:"replicas_per_turn_ms"`
}

// ReplicaReport is one replica's memory and CPU.
type ReplicaReport struct {
	Name      string  `json:"name"`
	PID       int     `json:"pid,omitempty"`
	IdleRSSMB float64 `json:"idle_rss_mb"`
	// Of the idle RSS: anonymous memory (heap, stacks) and file pages
	// (mostly the binary's code).
	IdleAnonMB float64 `json:"idle_rss_anon_mb"`
	IdleFileMB float64 `json:"idle_rss_file_mb"`
	LoadRSSMB  float64 `json:"after_load_rss_mb"`
	PeakRSSMB  float64 `json:"peak_rss_mb"`
	CPUS       float64 `json:"load_cpu_s"`
	SettleCPU  float64 `json:"settle_cpu_s"` // after the last answer, during the settle
	// From its /metrics, idle and after the load.
	IdleGoroutines int     `json:"idle_goroutines"`
	LoadGoroutines int     `json:"after_load_goroutines"`
	IdleHeapMB     float64 `json:"idle_heap_mb"`
	LoadHeapMB     float64 `json:"after_load_heap_mb"`
}

// IdleReport is the RSS with many idle sessions.
type IdleReport struct {
	Sessions int       `json:"sessions"`
	Via      string    `json:"via"`
	RSSMB    []float64 `json:"rss_mb"` // by replica
	HeapMB   []float64 `json:"heap_mb"`
	Routines []int     `json:"goroutines"`
	Took     float64   `json:"took_s"` // to make them
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentiles of sorted durations.
func percentiles(sorted []time.Duration) Percentiles {
	if len(sorted) == 0 {
		return Percentiles{}
	}
	at := func(p float64) float64 {
		i := int(p*float64(len(sorted))+0.5) - 1
		return ms(sorted[min(max(i, 0), len(sorted)-1)])
	}
	return Percentiles{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: ms(sorted[len(sorted)-1])}
}

// WriteText prints the report for a person.
func (r *Report) WriteText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("firstmate-load: %s, %d replica(s), %d sessions, %d messages (%d delivered twice), %s", r.Platform, r.Replicas,
		r.Sessions, r.Messages, r.Duplicated, r.Mode)
	p("  model: %d tool call(s) a turn, %gms a reply; %d CPUs on this machine", r.ToolsPerTurn, r.ModelDelayMS, r.CPUs)
	if r.Messages == 0 {
		for _, rep := range r.Replica {
			p("replica %s (pid %d): idle RSS %.1f MB (anon %.1f, file %.1f); heap %.1f MB; %d goroutines",
				rep.Name, rep.PID, rep.IdleRSSMB, rep.IdleAnonMB, rep.IdleFileMB, rep.IdleHeapMB, rep.IdleGoroutines)
		}
		r.writeIdle(p)
		return
	}
	p("throughput: %.1f turns/s, %.1f answers/s (%d turns in %.2fs, %.2f model requests a turn)",
		r.TurnsPerS, r.AnsweredPerS, r.Turns, r.DurationS, r.ModelCallsTurn)
	if r.SteadyAnsweredPerS > 0 {
		p("  %.1f answers/s from the 10th to the 90th percentile answer (without the start and the drain)", r.SteadyAnsweredPerS)
	}
	p("latency, ingress to answer less the model's time: p50 %.1fms  p95 %.1fms  p99 %.1fms  max %.1fms",
		r.LatencyMS.P50, r.LatencyMS.P95, r.LatencyMS.P99, r.LatencyMS.Max)
	p("messages: %d answered, %d lost, %d answered twice, %d out of order; %d redelivered by the platform",
		r.Answered, r.Lost, r.AnsweredTwice, r.OutOfOrder, r.Redelivered)
	for _, e := range []struct {
		what string
		ids  []string
	}{{"lost", r.Examples.Lost}, {"answered twice", r.Examples.Twice}, {"out of order", r.Examples.OutOfOrder}, {"slowest", r.Examples.Slowest}} {
		if len(e.ids) > 0 {
			p("  %s, e.g.: %s", e.what, strings.Join(e.ids, ", "))
		}
	}
	where := "shared: includes other clients' commands"
	if r.Redis.Private {
		where = "private server"
	}
	p("redis (%s): %.1f commands/turn, %.1f round trips/turn; idle %.1f commands/s, %.1f round trips/s",
		where, r.Redis.CommandsPerTurn, r.Redis.RoundTripsPerTurn, r.Redis.IdleCommandsPerS, r.Redis.IdleRoundTripsPS)
	p("  by command, per turn: %s", perTurnList(r.Redis.ByCommand))
	p("platform calls per turn: %s", perTurnList(r.PlatformCalls))
	p("new TCP connections per turn: to the model %.2f, to the platform API %.2f", r.Conns.ModelPerTurn, r.Conns.APIPerTurn)
	p("cpu during the load: replicas %.2fs (%.2fms/turn), redis %.2fs, generator and fakes %.2fs",
		r.CPU.Replicas, r.CPU.PerTurnMS, r.CPU.Redis, r.CPU.Generator)
	if r.Held.Turns > 0 {
		p("held at once: %d turns waiting on the model, RSS %.1f MB then: %.1f KB a turn over the idle RSS",
			r.Held.Turns, r.Held.RSSMB, r.Held.PerTurnKB)
	}
	for _, rep := range r.Replica {
		p("replica %s (pid %d): RSS idle %.1f MB (anon %.1f, file %.1f), after load %.1f MB, peak %.1f MB; heap idle %.1f MB, after %.1f MB; goroutines idle %d, after %d; CPU %.2fs in the load, %.2fs in the settle",
			rep.Name, rep.PID, rep.IdleRSSMB, rep.IdleAnonMB, rep.IdleFileMB, rep.LoadRSSMB, rep.PeakRSSMB, rep.IdleHeapMB, rep.LoadHeapMB,
			rep.IdleGoroutines, rep.LoadGoroutines, rep.CPUS, rep.SettleCPU)
	}
	r.writeIdle(p)
}

// writeIdle prints the idle sessions' line and the notes.
func (r *Report) writeIdle(p func(string, ...any)) {
	if r.IdleSessions != nil {
		mb := make([]string, len(r.IdleSessions.RSSMB))
		for i, v := range r.IdleSessions.RSSMB {
			mb[i] = fmt.Sprintf("%.1f MB", v)
			if i < len(r.IdleSessions.HeapMB) && i < len(r.IdleSessions.Routines) {
				mb[i] += fmt.Sprintf(" (heap %.1f MB, %d goroutines)", r.IdleSessions.HeapMB[i], r.IdleSessions.Routines[i])
			}
		}
		p("with %d idle sessions (made via %s in %.1fs): RSS %s", r.IdleSessions.Sessions, r.IdleSessions.Via,
			r.IdleSessions.Took, strings.Join(mb, ", "))
	}
	for _, n := range r.Notes {
		p("note: %s", n)
	}
}

// perTurnList prints "name 1.00" entries, the largest first.
func perTurnList(m map[string]float64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
