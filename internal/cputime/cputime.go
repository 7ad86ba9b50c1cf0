//go:build unix

// Package cputime measures the CPU time a process spends, on all its
// goroutines, for benchmarks of the fakes: what the load generator, which
// runs them, takes from the machine that the replicas share.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Clock is the process's CPU time when a measure began.
type Clock time.Duration

// Start begins a measure.
func Start() Clock { return Clock(Process()) }

// Report reports the CPU time spent since c began per operation of b, as
// cpu-ns/op.
func (c Clock) Report(b *testing.B) {
	b.ReportMetric(float64(Process()-time.Duration(c))/float64(b.N), "cpu-ns/op")
}

// Process is the CPU time (user and system) the process spent so far; 0
// if it cannot be read.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
