package fakellm

import (
	"bytes"
	"slices"
	"sync"

	// The requests are decoded by segmentio's drop-in encoding/json, which
	// is several times faster on a request's tens of KB of tool schemas:
	// under the load generator this fake shares the CPUs with what it
	// measures.
	fastjson "github.com/segmentio/encoding/json"
)

// A client sends the same tools on every request: the same tens of KB of
// JSON schemas, which are most of a request and most of the time spent
// decoding it. toolsCache keeps the decoded tools of the arrays it saw, so
// that a request that carries one again is decoded without them: the array
// is cut out of the body, the rest decoded, and the kept tools put in.
// The result is always what decoding the whole body gives; whatever the
// shortcut cannot prove the same (an error, a duplicate "tools" key, the
// array found elsewhere than at the top-level "tools") is decoded whole.

const (
	// maxCachedTools is how many tools arrays are kept, the most recently
	// used first: a few clients with different tools.
	maxCachedTools = 16
	// minCachedTools is the size of the smallest array worth keeping: a
	// short one is quick to decode, and one as short as [] is found in
	// many places of a body.
	minCachedTools = 512
)

// toolsCache is the tools arrays seen, decoded. It is safe for concurrent
// use.
type toolsCache struct {
	mu      sync.Mutex
	entries []toolsEntry // most recently used first
}

// toolsEntry is one tools array: its JSON exactly as sent, and its tools.
// The tools are never handed out themselves, only copies (cloneTools),
// so that nothing a handler does to a request's tools reaches the cache.
type toolsEntry struct {
	raw   []byte
	tools []Tool
}

// placeholder stands in the body for a tools array that is cut out.
var placeholder = []byte("[]")

// wireRequest is a Request whose tools are not decoded, only located.
type wireRequest struct {
	Request
	Tools rawTools `json:"tools"`
}

// rawTools is the value of a request's "tools" key as decoding meets it:
// where it is in the decoded buffer, and how many times the key came.
// segmentio's decoder hands UnmarshalJSON the value where it lies in its
// input (as encoding/json does); were it ever to hand a copy, no cut
// array would be recognized and every body would be decoded whole:
// slower, still right (TestDecodeRequestShortcut would fail).
type rawTools struct {
	raw []byte
	n   int
}

func (t *rawTools) UnmarshalJSON(b []byte) error {
	t.raw = b
	t.n++
	return nil
}

// decodeRequest decodes a chat completion request body.
func (c *toolsCache) decodeRequest(body []byte) (Request, error) {
	if req, ok := c.decodeFast(body); ok {
		return req, nil
	}
	var req Request
	err := fastjson.Unmarshal(body, &req)
	return req, err
}

// decodeFast decodes body with a known tools array cut out, or else with
// its tools array decoded on its own (and kept when large). ok is false
// when it cannot tell that the result is the whole body's.
func (c *toolsCache) decodeFast(body []byte) (req Request, ok bool) {
	doc, at, e := c.cut(body)
	var w wireRequest
	if fastjson.Unmarshal(doc, &w) != nil || w.Tools.n > 1 {
		return Request{}, false
	}
	req = w.Request
	switch {
	case at >= 0:
		// The top-level tools must be the placeholder, at the place of
		// the array cut out.
		if w.Tools.n == 0 || len(w.Tools.raw) != len(placeholder) || &w.Tools.raw[0] != &doc[at] {
			return Request{}, false
		}
		req.Tools = cloneTools(e.tools)
	case w.Tools.n == 1:
		if fastjson.Unmarshal(w.Tools.raw, &req.Tools) != nil {
			return Request{}, false
		}
		if len(w.Tools.raw) >= minCachedTools && w.Tools.raw[0] == '[' {
			c.put(w.Tools.raw, req.Tools)
			req.Tools = cloneTools(req.Tools)
		}
	}
	return req, true
}

// cut returns body with the first kept tools array found in it replaced
// by the placeholder, at offset at, and the array's entry; or body itself
// and at -1 when it holds none of them.
func (c *toolsCache) cut(body []byte) (doc []byte, at int, e toolsEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, kept := range c.entries {
		i := bytes.Index(body, kept.raw)
		if i < 0 {
			continue
		}
		copy(c.entries[1:k+1], c.entries[:k])
		c.entries[0] = kept
		doc = make([]byte, 0, len(body)-len(kept.raw)+len(placeholder))
		doc = append(doc, body[:i]...)
		doc = append(doc, placeholder...)
		doc = append(doc, body[i+len(kept.raw):]...)
		return doc, i, kept
	}
	return body, -1, toolsEntry{}
}

// put keeps the tools decoded from raw, which it copies.
func (c *toolsCache) put(raw []byte, tools []Tool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if bytes.Equal(e.raw, raw) {
			return // another request put it first
		}
	}
	if len(c.entries) == maxCachedTools {
		c.entries = c.entries[:maxCachedTools-1]
	}
	c.entries = slices.Insert(c.entries, 0, toolsEntry{raw: bytes.Clone(raw), tools: tools})
}

// cloneTools copies tools deeply: the slice and each tool's parameters
// (the strings cannot change).
func cloneTools(tools []Tool) []Tool {
	if tools == nil {
		return nil
	}
	out := slices.Clone(tools)
	n := 0
	for _, t := range tools {
		n += len(t.Function.Parameters)
	}
	buf := make([]byte, 0, n)
	for i, t := range tools {
		if p := t.Function.Parameters; p != nil {
			start := len(buf)
			buf = append(buf, p...)
			out[i].Function.Parameters = buf[start:len(buf):len(buf)]
		}
	}
	return out
}
