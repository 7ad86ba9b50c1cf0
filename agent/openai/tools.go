package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
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
// in the go-openai request, and recordingDoer writes the bytes into the
// body on the way out (spliceTools). The body is the same as go-openai
// would have sent, with "tools" first.

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

// spliceTools puts the encoded tools array into a request body that
// go-openai encoded without one: {"tools":[…],<the rest>}. The body is one
// buffer, which net/http writes as it is: a reader of several parts was
// copied through buffers allocated for each request (io.MultiReader's
// WriteTo, net.TCPConn's ReadFrom), a third of a turn's allocations.
func spliceTools(req *http.Request, tools []byte) error {
	if req.Body == nil || req.ContentLength < 2 {
		return errors.New("openai: a request with tools has no body")
	}
	defer req.Body.Close()
	const head = `{"tools":`
	body := make([]byte, len(head)+len(tools)+int(req.ContentLength))
	n := copy(body, head)
	n += copy(body[n:], tools)
	rest := body[n:] // "{…}", whose brace becomes the comma
	if _, err := io.ReadFull(req.Body, rest); err != nil {
		return fmt.Errorf("openai: reading the request body: %w", err)
	}
	switch {
	case rest[0] != '{':
		return errors.New("openai: the request body is not a JSON object")
	case rest[1] == '}': // no other field: {"tools":[…]}
		body = append(body[:n], '}')
	default:
		rest[0] = ','
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return nil
}
