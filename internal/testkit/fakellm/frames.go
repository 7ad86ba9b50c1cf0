package fakellm

import (
	"bytes"
	"encoding/json"
	"slices"
)

// frames are the server-sent events of one streamed answer ("data: …"
// and a blank line each), encoded into one buffer before the first is
// written. Every chunk of an answer has the same id, object, created and
// model, so their JSON is made once; each chunk adds only its delta and
// finish_reason. A frame is byte for byte json.Marshal of its chunk.
type frames struct {
	buf  bytes.Buffer
	enc  *json.Encoder // into buf
	head []byte        // a chunk's JSON up to the value of its delta
	ends []int         // where each frame ends in buf
}

// chunkTail ends the JSON of a chunk with one empty choice; what comes
// before its delta is the head of every chunk of the answer.
const chunkTail = `{},"finish_reason":null}]}`

// newFrames starts the frames of the answer with id, created at created
// (Unix seconds) by model.
func newFrames(id string, created int64, model string) *frames {
	f := &frames{}
	f.enc = json.NewEncoder(&f.buf)
	b, err := json.Marshal(chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
		Choices: []chunkChoice{{}}})
	if err != nil || !bytes.HasSuffix(b, []byte(chunkTail)) {
		panic("fakellm: a chunk marshals as " + string(b)) // it always marshals so
	}
	f.head = b[:len(b)-len(chunkTail)]
	return f
}

// grow makes room for about n more frames.
func (f *frames) grow(n int) {
	f.buf.Grow(n * (len("data: \n\n") + len(f.head) + len(`{"content":"…"},"finish_reason":null}]}`)))
	f.ends = slices.Grow(f.ends, n)
}

// add adds the chunk of one choice: d, and why the answer ends (nil
// while it goes on).
func (f *frames) add(d *delta, finish *string) {
	f.buf.WriteString("data: ")
	f.buf.Write(f.head)
	f.encode(d)
	f.buf.WriteString(`,"finish_reason":`)
	f.encode(finish)
	f.buf.WriteString("}]}\n\n")
	f.ends = append(f.ends, f.buf.Len())
}

// addChunk adds a chunk that is not one choice's, such as the usage.
func (f *frames) addChunk(c *chunk) {
	f.buf.WriteString("data: ")
	f.encode(c)
	f.buf.WriteString("\n\n")
	f.ends = append(f.ends, f.buf.Len())
}

// encode writes the JSON of v as json.Marshal makes it.
func (f *frames) encode(v any) {
	if err := f.enc.Encode(v); err != nil {
		panic(err) // the chunk types always marshal
	}
	f.buf.Truncate(f.buf.Len() - 1) // the newline Encode ends with
}

// len is how many frames there are.
func (f *frames) len() int { return len(f.ends) }

// frame returns frame i.
func (f *frames) frame(i int) []byte {
	start := 0
	if i > 0 {
		start = f.ends[i-1]
	}
	return f.buf.Bytes()[start:f.ends[i]]
}
