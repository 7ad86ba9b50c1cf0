package shell

import (
	"os/exec"
	"testing"
	"time"
)

// treeCPU counts what a process's live children use: a shell that only
// waits, with a busy loop below it, is charged for the loop.
func TestTreeCPU(t *testing.T) {
	cmd := exec.Command("sh", "-c", "(while :; do :; done) & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("pkill", "-KILL", "-P", itoa(cmd.Process.Pid)).Run()
		cmd.Process.Kill()
		cmd.Wait()
	})
	// However busy the machine, the loop gets a few ticks in a minute.
	deadline := time.Now().Add(time.Minute)
	for treeCPU(cmd.Process.Pid) < 50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("the busy child was charged %s in a minute", treeCPU(cmd.Process.Pid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if own := statCPU(cmd.Process.Pid); own*int64(time.Second/userHZ) >= int64(50*time.Millisecond) {
		t.Errorf("the waiting shell itself used %d ticks: the figure is not its children's", own)
	}
}
