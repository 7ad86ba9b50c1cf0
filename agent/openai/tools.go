package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"

	goai "github.com/sashabaranov/go-openai"

	"github.com/firstmate/firstmate/agent"
)

// The "tools" array of a request is most of its bytes (a few dozen
// schemas: 13 KB or more), and the same for every request of a channel.
// go-openai would encode it on every request, and encoding/json checks
// and compacts every schema it copies, which was the largest single cost
// of a turn. So a model encodes each tool set once, leaves the field empty
// in the go-openai request, and puts the bytes first in the body it
// encodes (encodeBody). The body is the same as go-openai would have sent,
// with "tools" first.

// maxToolSets bounds the encoded tool sets a model keeps: one per
// distinct set of tools a channel's policy leaves. Past it, the cache
// starts again.
const maxToolSets = 64

// toolSets holds encoded tool arrays by a hash of the specs.
type toolSets struct {
	seed maphash.Seed
	mu   sync.Mutex
	sets map[uint64]encodedTools
}

type encodedTools struct {
	specs []agent.ToolSpec // compared on a hit: a collision sends nothing wrong
	json  []byte
}

func newToolSets() *toolSets {
	return &toolSets{seed: maphash.MakeSeed(), sets: map[uint64]encodedTools{}}
}

// encode returns the JSON array of tools (sorted by name already) as the
// API's "tools" field, encoding and validating it only the first time.
func (c *toolSets) encode(tools []agent.ToolSpec) ([]byte, error) {
	var h maphash.Hash
	h.SetSeed(c.seed)
	for _, t := range tools {
		h.WriteString(t.Name)
		h.WriteByte(0)
		h.WriteString(t.Description)
		h.WriteByte(0)
		h.Write(t.Schema)
		h.WriteByte(0)
	}
	sum := h.Sum64()
	c.mu.Lock()
	e, ok := c.sets[sum]
	c.mu.Unlock()
	if ok && sameSpecs(e.specs, tools) {
		return e.json, nil
	}
	list := make([]goai.Tool, len(tools))
	for i, t := range tools {
		if len(t.Schema) > 0 && !json.Valid(t.Schema) {
			return nil, fmt.Errorf("openai: tool %s has a schema that is not valid JSON", t.Name)
		}
		list[i] = goai.Tool{Type: goai.ToolTypeFunction, Function: &goai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: schemaOf(t),
		}}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("openai: encoding tools: %w", err)
	}
	specs := make([]agent.ToolSpec, len(tools))
	for i, t := range tools {
		specs[i] = agent.ToolSpec{Name: t.Name, Description: t.Description, Schema: slices.Clone(t.Schema)}
	}
	c.mu.Lock()
	if len(c.sets) >= maxToolSets {
		clear(c.sets)
	}
	c.sets[sum] = encodedTools{specs: specs, json: b}
	c.mu.Unlock()
	return b, nil
}

func sameSpecs(a, b []agent.ToolSpec) bool {
	return slices.EqualFunc(a, b, func(x, y agent.ToolSpec) bool {
		return x.Name == y.Name && x.Description == y.Description && bytes.Equal(x.Schema, y.Schema)
	})
}
