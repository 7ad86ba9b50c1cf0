package tools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Job is a background job as every replica sees it: the replica running it
// (Owner) writes it when it starts, every few seconds while it runs (Seen,
// Tail) and when it ends; any replica reads it to list the channel's jobs
// and asks the owner to stop one through [JobBoard.AskStop].
type Job struct {
	ID      int       `json:"id"`
	Owner   string    `json:"owner"`   // the replica running it
	Command string    `json:"command"` // as the model gave it
	Log     string    `json:"log"`     // workspace-relative
	Started time.Time `json:"started"`
	Seen    time.Time `json:"seen"` // the owner's latest word on it
	Ended   time.Time `json:"ended,omitzero"`
	State   string    `json:"state,omitempty"` // how it ended; "" while running
	Tail    []string  `json:"tail,omitempty"`  // the last lines of its output
	// CPU is the CPU time the job's processes have used, as of Seen.
	CPU time.Duration `json:"cpu,omitempty"`
	// Session is the conversation the job was started from ([Call].Session),
	// User and UserName the person who started it: where a word about the
	// job goes, and whose power it spends while it runs. They are empty for
	// a job started outside a conversation, and in records written before
	// they were kept.
	Session  string `json:"session,omitempty"`
	User     string `json:"user,omitempty"`
	UserName string `json:"user_name,omitempty"`
	// StopAsked is who asked it to stop, filled by Jobs from the request
	// AskStop left; it is not part of what PutJob writes, so an owner's
	// update never wipes a request out.
	StopAsked string `json:"-"`
}

// Running says whether the job has not ended.
func (j Job) Running() bool { return j.State == "" }

// JobBoard keeps background jobs where every replica sees them. A space is
// one workspace (one channel); IDs count from 1 in each space. The store
// implements it, so that a job started on one replica is listed and stopped
// from any other; with no store, the shell keeps one in memory.
type JobBoard interface {
	// NextJobID hands out the space's next job ID; an ID is never handed
	// out twice in a space.
	NextJobID(ctx context.Context, space string) (int, error)
	// PutJob writes j, replacing what the board held for j.ID.
	PutJob(ctx context.Context, space string, j Job) error
	// Jobs returns the space's jobs, oldest first, with StopAsked set on
	// those someone asked to stop.
	Jobs(ctx context.Context, space string) ([]Job, error)
	// AskStop leaves a request that job id stop; its owner sees it on its
	// next look. It returns ErrNoJob if the board holds no such job.
	AskStop(ctx context.Context, space string, id int, by string) error
	// DropJob forgets job id and any request to stop it.
	DropJob(ctx context.Context, space string, id int) error
}

// JobSpace is the board's space of the channel whose workspace is called
// name (the name given to [OpenWorkspace]): the workspace directory's name,
// so a space is the same on every replica whatever its data dir is called,
// and a tool that holds only the workspace finds it from its directory.
func JobSpace(name string) string { return DirName(name) }

// ErrNoJob is returned by [JobBoard.AskStop] for a job the board does not
// hold.
var ErrNoJob = errors.New("no such job")

// JobKeep is how long a board keeps a space's jobs after its latest
// change: longer than any job lives, so a running job is never forgotten,
// and short enough that a channel nobody uses leaves nothing behind.
const JobKeep = 7 * 24 * time.Hour

// CheckJobSpace refuses a space a board cannot key by.
func CheckJobSpace(space string) error {
	if space == "" {
		return errors.New("job board: empty space")
	}
	if len(space) > 512 {
		return fmt.Errorf("job board: space of %d bytes", len(space))
	}
	return nil
}

// ParseJobID reads a job's ID as a model writes it: "3", " 3 " or "job 3".
func ParseJobID(s string) (int, error) {
	id, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(s), "job "))
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not a job id; jobs lists them", s)
	}
	return id, nil
}
