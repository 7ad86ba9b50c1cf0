package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// phase is a batch of messages sent to the bot and waited for.
type phase struct {
	plat     platform
	track    *tracker
	first    int // the first session's person number
	sessions int
	messages int
	dup      func(i int) bool // whether message i is delivered twice
	rate     float64          // messages a second; 0: closed loop
	window   int
	think    time.Duration // a person's pause after an answer
	timeout  time.Duration
	stall    time.Duration
}

// message i of a phase goes to session i%sessions, as its i/sessions-th.
func (p *phase) person(i int) (person, seq int) {
	return p.first + i%p.sessions, i / p.sessions
}

func (p *phase) send(i int) {
	person, seq := p.person(i)
	p.track.sent(msgID{person, seq}, time.Now())
	again := p.plat.Send(person, questionToken(person, seq)+" what is in the workspace?")
	if p.dup(i) {
		again()
	}
}

// run sends the phase's messages and waits for their answers: all of
// them, or until timeout, or until no answer came for stall. An
// unanswered message is no error; the tracker counts it lost.
func (p *phase) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	if p.rate > 0 {
		wg.Go(func() { p.openLoop(ctx) })
	} else {
		for s := range min(p.sessions, p.messages) {
			wg.Go(func() { p.closedLoop(ctx, s) })
		}
	}
	deadline := time.NewTimer(p.timeout)
	defer deadline.Stop()
	stall := time.NewTimer(p.stall)
	defer stall.Stop()
	for {
		n, next := p.track.progress()
		if n >= p.messages {
			return nil
		}
		select {
		case <-next:
			stall.Reset(p.stall)
		case <-stall.C:
			return nil
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("load interrupted: %w", context.Cause(ctx))
		}
	}
}

// openLoop sends message i at i/rate seconds from the start, in the
// sessions' round robin, whatever the answers.
func (p *phase) openLoop(ctx context.Context) {
	start := time.Now()
	for i := range p.messages {
		at := start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		p.send(i)
	}
}

// closedLoop is one person: they send their next message while fewer than
// window of theirs wait for an answer, think after the answer that let them.
func (p *phase) closedLoop(ctx context.Context, s int) {
	person := p.first + s
	wake := p.track.waiter(person)
	low := 0 // every message before it is answered
	for i := s; i < p.messages; i += p.sessions {
		seq := i / p.sessions
		for {
			for low < seq && p.track.isAnswered(msgID{person, low}) {
				low++
			}
			waiting := 0
			for j := low; j < seq; j++ {
				if !p.track.isAnswered(msgID{person, j}) {
					waiting++
				}
			}
			if waiting < p.window {
				break
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
		}
		if seq > 0 && p.think > 0 && !sleep(ctx, p.think) {
			return
		}
		p.send(i)
	}
}
