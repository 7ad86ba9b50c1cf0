package shell

import (
	"context"
	"slices"
	"sync"

	"github.com/firstmate/firstmate/tools"
)

// memBoard is the job board of a shell with no store to share it through:
// this process's jobs, as the store would keep them.
type memBoard struct {
	mu     sync.Mutex
	next   map[string]int
	spaces map[string]map[int]tools.Job
	stops  map[string]map[int]string
}

func newMemBoard() *memBoard {
	return &memBoard{next: map[string]int{}, spaces: map[string]map[int]tools.Job{}, stops: map[string]map[int]string{}}
}

func (b *memBoard) NextJobID(_ context.Context, space string) (int, error) {
	if err := tools.CheckJobSpace(space); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next[space]++
	return b.next[space], nil
}

func (b *memBoard) PutJob(_ context.Context, space string, j tools.Job) error {
	if err := tools.CheckJobSpace(space); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spaces[space] == nil {
		b.spaces[space] = map[int]tools.Job{}
	}
	j.StopAsked = ""
	j.Tail = slices.Clone(j.Tail)
	b.spaces[space][j.ID] = j
	return nil
}

func (b *memBoard) Jobs(_ context.Context, space string) ([]tools.Job, error) {
	if err := tools.CheckJobSpace(space); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []tools.Job
	for _, j := range b.spaces[space] {
		j.StopAsked = b.stops[space][j.ID]
		j.Tail = slices.Clone(j.Tail)
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b tools.Job) int { return a.ID - b.ID })
	return out, nil
}

func (b *memBoard) AskStop(_ context.Context, space string, id int, by string) error {
	if err := tools.CheckJobSpace(space); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.spaces[space][id]; !ok {
		return tools.ErrNoJob
	}
	if b.stops[space] == nil {
		b.stops[space] = map[int]string{}
	}
	b.stops[space][id] = by
	return nil
}

func (b *memBoard) DropJob(_ context.Context, space string, id int) error {
	if err := tools.CheckJobSpace(space); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.spaces[space], id)
	delete(b.stops[space], id)
	return nil
}
