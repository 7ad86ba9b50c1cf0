package storegov

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/firstmate/firstmate/tools"
)

// JobField and StopField name a job's record and its stop request in a
// space's board (a Redis hash, a bbolt bucket).
func JobField(id int) string  { return "job:" + strconv.Itoa(id) }
func StopField(id int) string { return "stop:" + strconv.Itoa(id) }

// DecodeJobs reads a space's board (field → value) into its jobs, oldest
// first, each with the stop request left for it.
func DecodeJobs(board map[string]string) ([]tools.Job, error) {
	var out []tools.Job
	for f, v := range board {
		if !strings.HasPrefix(f, "job:") {
			continue
		}
		var j tools.Job
		if err := json.Unmarshal([]byte(v), &j); err != nil {
			return nil, fmt.Errorf("job %s: %w", f, err)
		}
		j.StopAsked = board[StopField(j.ID)]
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b tools.Job) int { return a.ID - b.ID })
	return out, nil
}
