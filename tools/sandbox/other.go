//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"io"
)

// errNotLinux is why there is no sandbox here: it is built from Linux
// namespaces, Landlock and seccomp.
var errNotLinux = &Unavailable{Cause: "the sandbox needs Linux (namespaces, Landlock, seccomp)", Fix: "run firstmate on Linux to give it a shell",
	Err: errors.ErrUnsupported}

// Sandbox is unavailable off Linux; every method says so.
type Sandbox struct{ cfg Config }

// New returns a sandbox that cannot run anything on this system.
func New(cfg Config) *Sandbox { cfg.Limits = cfg.Limits.withDefaults(); return &Sandbox{cfg: cfg} }

// Kind says where commands would run.
func (s *Sandbox) Kind() Kind { return s.cfg.Kind }

// Limits are the defaults for every command.
func (s *Sandbox) Limits() Limits { return s.cfg.Limits }

// Owner needs no hand-over here.
func (s *Sandbox) Owner() (uid, gid int) { return -1, -1 }

// Probe reports that there is no sandbox.
func (s *Sandbox) Probe(context.Context) (Report, error) { return Report{}, errNotLinux }

// Process is never started here.
type Process struct{}

// Start refuses.
func (s *Sandbox) Start(context.Context, Command, io.Writer) (*Process, error) {
	return nil, errNotLinux
}

// Run refuses.
func (s *Sandbox) Run(context.Context, Command) (Result, error) { return Result{}, errNotLinux }

// Kill does nothing.
func (p *Process) Kill() {}

// Pid is 0.
func (p *Process) Pid() int { return 0 }

// Wait refuses.
func (p *Process) Wait() (Result, error) { return Result{}, errNotLinux }

// MaybeHelper does nothing off Linux.
func MaybeHelper() {}
