package main

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
)

// inFlight counts the model calls being answered: each is one turn that
// waits on the model, what a replica holds while people wait.
type inFlight struct {
	next http.Handler
	n    atomic.Int64
}

func (f *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.n.Add(1)
	defer f.n.Add(-1)
	f.next.ServeHTTP(w, r)
}

// sampleEvery is how often the replicas' memory is read during the load.
const sampleEvery = 100 * time.Millisecond

// holdSample is the moment of the load with the most turns waiting on the
// model: how many, and the replicas' resident memory then.
type holdSample struct {
	turns int64
	rssMB float64 // of all replicas
}

// sampleHeld reads the model calls in flight and the replicas' RSS every
// sampleEvery until ctx ends, and returns the sample with the most calls
// in flight (the latest of equals, when memory has caught up).
func (r *runner) sampleHeld(ctx context.Context) holdSample {
	var best holdSample
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return best
		case <-t.C:
		}
		n := r.held.n.Load()
		if n == 0 || n < best.turns {
			continue
		}
		var rss float64
		for _, rp := range r.reps {
			if rp.pid == 0 {
				return holdSample{} // started by hand without -pids: no memory to read
			}
			m, err := readMem(rp.pid)
			if err != nil {
				return holdSample{}
			}
			rss += m.RSS
		}
		best = holdSample{turns: n, rssMB: rss}
	}
}
