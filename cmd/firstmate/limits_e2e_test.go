package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/firstmate/firstmate/adapters/console"
	"github.com/firstmate/firstmate/internal/testkit/fakellm"
	"github.com/firstmate/firstmate/tools"
)

// A model that asks for 1,500 reads of a 200 KB file in one step is the
// hostile case of a turn's limits: without them the next request carried
// every result (tens of MB), the process held them all at once, and the
// store kept them for every later call. With them the calls past the
// step's cap are not run, the results past the step's bytes are not
// shown, and the model is told both; the largest request stays small and
// so does the process. The bounds are limits, not timings: generous, and
// far below what the unbounded turn took.
func TestChatManyReadsInOneStepStayBounded(t *testing.T) {
	t.Parallel()
	const (
		maxRequest  = 4 << 20   // bytes of one request to the model
		maxRSSBytes = 200 << 20 // peak resident memory of the process
		maxStore    = 32 << 20  // the embedded store's file after the turn
	)
	r := manyReads(t, binary)
	t.Logf("%d reads of a %d B file in one step: %d requests, the largest %d B; peak RSS %d MiB (race detector on; %d MiB with its children); store %d B",
		r.reads, r.file, len(r.reqs), r.largest, r.rss>>20, r.withChildren>>20, r.store)
	if len(r.reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2\nstdout:\n%s", len(r.reqs), r.out)
	}
	if r.largest > maxRequest {
		t.Errorf("the largest request is %d B, over %d", r.largest, maxRequest)
	}
	if r.rss > maxRSSBytes {
		t.Errorf("peak RSS %d MiB, over %d MiB", r.rss>>20, maxRSSBytes>>20)
	}
	if r.store > maxStore {
		t.Errorf("the store is %d B after the turn, over %d", r.store, maxStore)
	}
	// The model was told why calls did not run and results are missing.
	second := string(r.reqs[1].Body)
	for _, want := range []string{"a step may make at most 32 tool calls", "not shown: this step's results passed 256 KiB"} {
		if !strings.Contains(second, want) {
			t.Errorf("the second request does not tell the model %q", want)
		}
	}
	// And the person sees that the turn was cut.
	if !strings.Contains(r.out, "1468 of 1500 tool calls were not run") {
		t.Errorf("the chat does not say calls were not run:\n%s", r.out)
	}
	if !strings.Contains(r.out, "read it all") {
		t.Errorf("no answer:\n%s", r.out)
	}
}

// BenchmarkManyReadsInOneStep reports the figures of the test above for
// firstmate built without the race detector, as it runs in production:
// the largest request, the peak RSS and the store's size after one such
// turn.
func BenchmarkManyReadsInOneStep(b *testing.B) {
	bin := plainBinary(b)
	var r manyReadsRun
	for b.Loop() {
		r = manyReads(b, bin)
	}
	b.ReportMetric(float64(r.largest), "max-request-B")
	b.ReportMetric(float64(r.rss)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(r.store), "store-B")
}

type manyReadsRun struct {
	reads, file  int
	reqs         []fakellm.Request
	largest      int   // bytes of the largest request
	rss          int64 // peak resident bytes of the process itself
	withChildren int64 // the peak of the process or of a child it waited for
	store        int64 // bytes of the embedded store's file afterwards
	out          string
}

// manyReads runs one chat turn of bin in which the model asks for 1,500
// reads of a 200 KB workspace file in one step, then answers.
func manyReads(tb testing.TB, bin string) manyReadsRun {
	tb.Helper()
	r := manyReadsRun{reads: 1500}
	data := tb.TempDir()
	ws := tools.WorkspacePath(filepath.Join(data, "workspaces"), console.Key.Channel().String())
	if err := os.MkdirAll(ws, 0o700); err != nil {
		tb.Fatal(err)
	}
	line := strings.Repeat("all work and no play makes a long file ", 2) + "\n" // 79 B
	big := strings.Repeat(line, 200<<10/len(line)+1)
	r.file = len(big)
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(big), 0o600); err != nil {
		tb.Fatal(err)
	}
	calls := make([]fakellm.ToolCall, r.reads)
	for i := range calls {
		calls[i] = fakellm.Call("read", map[string]string{"path": "big.txt"})
	}
	llm := fakellm.New(tb, fakellm.WithReplies(fakellm.Calls(calls...), fakellm.Text("read it all")))

	ctx, cancel := context.WithTimeout(tb.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "chat")
	cmd.Env = []string{"HOME=" + tb.TempDir(), "PATH=" + os.Getenv("PATH"),
		"OPENAI_BASE_URL=" + llm.URL(), "FIRSTMATE_MODEL=fake-model", "FIRSTMATE_DATA_DIR=" + data}
	cmd.Stdin = strings.NewReader("read big.txt as often as you can\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	peak := watchPeakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	r.rss = peak()
	if err != nil {
		tb.Fatalf("firstmate chat: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	r.out = out.String()
	// wait4's ru_maxrss (KiB) is the largest of the process and the
	// children it waited for, the sandbox's probe among them; it is logged
	// beside the process's own peak.
	r.withChildren = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	fi, err := os.Stat(filepath.Join(data, "firstmate.db"))
	if err != nil {
		tb.Fatal(err)
	}
	r.store = fi.Size()
	r.reqs = llm.Requests()
	for _, q := range r.reqs {
		r.largest = max(r.largest, len(q.Body))
	}
	return r
}

// The configured limits reach the turn: two calls a step and 1 KiB of
// results a step, as the file says.
func TestChatLimitsFromConfig(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	ws := tools.WorkspacePath(filepath.Join(data, "workspaces"), console.Key.Channel().String())
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte(strings.Repeat("a note of some length\n", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	read := fakellm.Call("read", map[string]string{"path": "notes.txt"})
	llm := fakellm.New(t, fakellm.WithReplies(fakellm.Calls(read, read, read), fakellm.Text("noted")))
	cfg := writeFile(t, "agent:\n  max_calls_per_step: 2\n  step_results_kb: 1\nllm:\n  context_tokens: -1\n")
	out, errOut, code := runBinary(t, append(chatEnv(t, llm, data), "FIRSTMATE_CONFIG="+cfg), "read the notes\n", "chat")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "1 of 3 tool calls was not run: a step may make at most 2.") {
		t.Errorf("the chat does not show the configured cap:\n%s", out)
	}
	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	second := string(reqs[1].Body)
	for _, want := range []string{"a step may make at most 2 tool calls", "not shown: this step's results passed 1 KiB"} {
		if !strings.Contains(second, want) {
			t.Errorf("the second request does not tell the model %q", want)
		}
	}
}

// watchPeakRSS samples the high-water mark of pid's resident memory
// (VmHWM, which only grows) until the returned function is called, and
// the function returns the last sample: the process's own peak, short of
// what it may take in the last few milliseconds before it exits.
func watchPeakRSS(pid int) func() int64 {
	var (
		mu   sync.Mutex
		peak int64
	)
	sample := func() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return
		}
		for line := range strings.Lines(string(b)) {
			if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
				if err == nil {
					mu.Lock()
					peak = max(peak, n<<10)
					mu.Unlock()
				}
			}
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}
