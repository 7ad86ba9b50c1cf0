package redis

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// startServer starts a private redis-server for t, with extra arguments,
// and returns its address; it is killed when t ends. Without a
// redis-server binary the test is skipped: the shared Redis covers the
// rest, and these tests need a server of their own (a Cluster, exact
// command statistics).
func startServer(t *testing.T, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server binary to start a private server")
	}
	// A free port: the kernel picks one, the server takes it over. Another
	// process could take it in between; the start then fails visibly.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := append([]string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", t.TempDir(),
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
	}, extra...)
	cmd := exec.Command(bin, args...)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c.Ping(t.Context()).Err() == nil {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not start: %s", addr, log.String())
		}
	}
}

// startCluster starts a Redis Cluster of n masters, the slots split
// evenly, and returns their addresses once every node sees the cluster
// as ok.
func startCluster(t *testing.T, n int) []string {
	t.Helper()
	ctx := t.Context()
	addrs := make([]string, n)
	nodes := make([]*goredis.Client, n)
	for i := range n {
		addrs[i] = startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		nodes[i] = goredis.NewClient(&goredis.Options{Addr: addrs[i]})
		defer nodes[i].Close()
	}
	const slots = 16384
	for i, c := range nodes {
		lo, hi := i*slots/n, (i+1)*slots/n-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			host, port, _ := net.SplitHostPort(addrs[0])
			if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok := true
		for _, c := range nodes {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				ok = false
			}
		}
		if ok {
			return addrs
		}
		if time.Now().After(deadline) {
			t.Fatal("the cluster did not become ok")
		}
	}
}

// commandStats returns how many times the server ran each command since
// its statistics were last reset, commands run by scripts included.
func commandStats(t *testing.T, c *goredis.Client) map[string]int64 {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		// cmdstat_get:calls=3,usec=...
		line, ok := strings.CutPrefix(sc.Text(), "cmdstat_")
		if !ok {
			continue
		}
		name, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", sc.Text(), err)
		}
		stats[name] = n
	}
	return stats
}

// resetStats resets the server's statistics.
func resetStats(t *testing.T, c *goredis.Client) {
	t.Helper()
	if err := c.ConfigResetStat(context.WithoutCancel(t.Context())).Err(); err != nil {
		t.Fatal(err)
	}
}

// setPassword makes the server at addr require password from then on.
func setPassword(t *testing.T, addr, password string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	if err := c.ConfigSet(t.Context(), "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
}

// startSentinel starts a Redis Sentinel that monitors the master at
// masterAddr under the name master, with extra lines for its
// configuration file, and returns its address once it knows the master;
// it is killed when t ends. It runs redis-sentinel, or redis-server
// --sentinel; without either the test is skipped.
func startSentinel(t *testing.T, master, masterAddr, password string, conf ...string) string {
	t.Helper()
	var bin string
	var args []string
	if b, err := exec.LookPath("redis-sentinel"); err == nil {
		bin = b
	} else if b, err := exec.LookPath("redis-server"); err == nil {
		bin, args = b, []string{"--sentinel"}
	} else {
		t.Skip("no redis-sentinel or redis-server binary to start a sentinel")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	host, mport, _ := net.SplitHostPort(masterAddr)
	lines := append([]string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(port),
		"dir " + dir,
		"daemonize no",
		"loglevel warning",
		fmt.Sprintf("sentinel monitor %s %s %s 1", master, host, mport),
	}, conf...)
	file := filepath.Join(dir, "sentinel.conf")
	// The sentinel rewrites its file, so it must be writable.
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{file}, args...)...)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := goredis.NewSentinelClient(&goredis.Options{Addr: addr, Password: password, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := c.GetMasterAddrByName(t.Context(), master).Result()
		if err == nil && len(got) == 2 && net.JoinHostPort(got[0], got[1]) == masterAddr {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sentinel on %s did not start (%v, %v): %s", addr, got, err, log.String())
		}
	}
}
