package tools

import (
	"encoding/json"
	"testing"
)

// A record written before the board kept who started a job still reads,
// as a job started outside a conversation.
func TestJobRecordOfBefore(t *testing.T) {
	var j Job
	old := `{"id":3,"owner":"web-0#1","command":"make","log":".jobs/3.log","started":"2025-01-02T03:04:05Z","seen":"2025-01-02T03:04:07Z","cpu":1500000000}`
	if err := json.Unmarshal([]byte(old), &j); err != nil {
		t.Fatal(err)
	}
	if j.ID != 3 || j.Command != "make" || !j.Running() || j.Session != "" || j.User != "" || j.UserName != "" {
		t.Fatalf("old record = %+v", j)
	}
}
