package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/firstmate/firstmate/agent"
	fmredis "github.com/firstmate/firstmate/store/redis"
)

// redisStats is a snapshot of what a Redis server counts.
type redisStats struct {
	at       time.Time
	commands map[string]int64 // calls by command (commandstats)
	reads    int64            // total_reads_processed: read events, about one per round trip
}

// readStats reads INFO commandstats and INFO stats.
func readStats(ctx context.Context, c *goredis.Client) (redisStats, error) {
	info, err := c.Info(ctx, "commandstats", "stats").Result()
	if err != nil {
		return redisStats{}, err
	}
	return parseStats(info, time.Now())
}

// parseStats reads the text of INFO commandstats and stats.
func parseStats(info string, at time.Time) (redisStats, error) {
	s := redisStats{at: at, commands: map[string]int64{}}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, rest, ok := strings.Cut(line, ":"); ok {
			if cmd, ok := strings.CutPrefix(name, "cmdstat_"); ok {
				// calls=12,usec=…,usec_per_call=…,rejected_calls=…,failed_calls=…
				for kv := range strings.SplitSeq(rest, ",") {
					if v, ok := strings.CutPrefix(kv, "calls="); ok {
						s.commands[cmd], _ = strconv.ParseInt(v, 10, 64)
					}
				}
			} else if name == "total_reads_processed" {
				s.reads, _ = strconv.ParseInt(rest, 10, 64)
			}
		}
	}
	return s, sc.Err()
}

// statsDelta is what happened between two snapshots.
type statsDelta struct {
	took     time.Duration
	commands map[string]int64
	reads    int64
}

func (s redisStats) since(earlier redisStats) statsDelta {
	d := statsDelta{took: s.at.Sub(earlier.at), commands: map[string]int64{}, reads: s.reads - earlier.reads}
	for cmd, n := range s.commands {
		if n -= earlier.commands[cmd]; n != 0 {
			d.commands[cmd] = n
		}
	}
	return d
}

func (d statsDelta) total() int64 {
	var n int64
	for _, c := range d.commands {
		n += c
	}
	return n
}

// privateRedis is a redis-server of our own, on a free port, without
// persistence.
type privateRedis struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func startPrivateRedis(ctx context.Context, dir string) (*privateRedis, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("-private-redis: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir)
	log, err := os.Create(dir + "/redis-server.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("-private-redis: %w", err)
	}
	r := &privateRedis{cmd: cmd, url: "redis://" + addr + "/0", done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(r.done)
	}()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.stop()
			return nil, errors.New("-private-redis: redis-server did not answer within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r, nil
}

func (r *privateRedis) stop() {
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// deletePrefix removes every key under prefix.
func deletePrefix(ctx context.Context, c *goredis.Client, prefix string) error {
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}

// seedSessions writes n sessions with one finished turn each through the
// store, as a replica would have left them: claimed, committed, released.
// keys gives each session's key.
func seedSessions(ctx context.Context, url, prefix string, n int, keys func(int) agent.SessionKey) error {
	st, err := fmredis.Open(ctx, url, fmredis.Options{Prefix: prefix})
	if err != nil {
		return err
	}
	defer st.Close()
	const owner, workers = "firstmate-load#1", 32
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := seedOne(ctx, st, keys(i), owner, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var firstErr error
feed:
	for i := range n {
		select {
		case next <- i:
		case firstErr = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if firstErr == nil {
		firstErr = <-errs
	}
	return firstErr
}

func seedOne(ctx context.Context, st *fmredis.Store, key agent.SessionKey, owner string, i int) error {
	if _, err := st.Claim(ctx, key, owner, time.Minute); err != nil {
		return fmt.Errorf("seed session %d: claim: %w", i, err)
	}
	call := agent.ToolCall{ID: fmt.Sprintf("call_seed_%d", i), Name: "ls", Args: []byte(`{"path":"."}`)}
	turn := []agent.Message{
		{Role: agent.RoleUser, Content: fmt.Sprintf("[person %d] what is in the workspace?", i)},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}},
		{Role: agent.RoleTool, ToolCallID: call.ID, ToolName: "ls", Content: "(empty directory)"},
		{Role: agent.RoleAssistant, Content: "**Done.** The workspace is empty."},
	}
	if err := st.Commit(ctx, key, owner, 0, turn, nil); err != nil {
		return fmt.Errorf("seed session %d: commit: %w", i, err)
	}
	if _, err := st.Release(ctx, key, owner, ""); err != nil {
		return fmt.Errorf("seed session %d: release: %w", i, err)
	}
	return nil
}
