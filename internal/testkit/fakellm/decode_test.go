package fakellm

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	fastjson "github.com/segmentio/encoding/json"
)

// bigTools is a tools array large enough to be kept, with n tools.
func bigTools(n int) string {
	tools := make([]string, n)
	for i := range tools {
		tools[i] = fmt.Sprintf(`{"type":"function","function":{"name":"t%d","description":"%s",`+
			`"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}`,
			i, strings.Repeat("does a thing ", 5))
	}
	return "[" + strings.Join(tools, ",") + "]"
}

// The cache decodes every body as decoding it whole does, errors included,
// whether it takes the shortcut or not.
func TestDecodeRequestSameAsWhole(t *testing.T) {
	tools, other := bigTools(8), bigTools(9)
	bare := strings.ReplaceAll(tools, `"description":"`+strings.Repeat("does a thing ", 5)+`",`, "")
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	bodies := []string{
		`{"model":"m",` + msgs + `,"tools":` + tools + `}`,
		`{"tools":` + tools + `,"model":"m",` + msgs + `,"stream":true}`,
		`{"tools":` + tools + `,"model":"m",` + msgs + `,"tool_choice":"auto"}`,
		` { "tools" : ` + tools + ` , "model":"m",` + msgs + ` } `,
		`{"model":"m",` + msgs + `,"tools":` + other + `}`,
		`{"model":"m",` + msgs + `}`,
		`{"model":"m",` + msgs + `,"tools":null}`,
		`{"model":"m",` + msgs + `,"tools":[]}`,
		`{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"x"}}]}`,
		`{"model":"m",` + msgs + `,"Tools":` + tools + `}`,
		`{"model":"m",` + msgs + `,"tools":` + tools + `,"Request":{"model":"x"},"Header":{"a":["b"]},"Body":"x"}`,
		// Twice: the last one counts, as when decoding whole.
		`{"model":"m",` + msgs + `,"tools":` + tools + `,"tools":[{"type":"function","function":{"name":"x"}}]}`,
		`{"model":"m",` + msgs + `,"tools":` + tools + `,"tools":null}`,
		`{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"x"}}],"tools":` + tools + `}`,
		`{"model":"m",` + msgs + `,"tools":` + bare + `}`,
		`{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"x","description":"d"}}],"tools":` + bare + `}`,
		`{"model":"m",` + msgs + `,"tools":[],"tools":` + tools + `}`,
		// The array elsewhere first.
		`{"extra":` + tools + `,"model":"m",` + msgs + `,"tools":` + tools + `}`,
		`{"extra":` + tools + `,"model":"m",` + msgs + `}`,
		`{"extra":` + tools + `,"model":"m",` + msgs + `,"tools":"[]"}`,
		`{"extra":` + tools + `,"model":"m",` + msgs + `,"tools":[]}`,
		// Errors.
		`{"model":"m",` + msgs + `,"tools":` + tools,
		`{"model":"m",` + msgs + `,"tools":` + tools + `} x`,
		`{"model":7,` + msgs + `,"tools":` + tools + `}`,
		`{"model":"m",` + msgs + `,"tools":"x"}`,
		`{"model":"m",` + msgs + `,"tools":{}}`,
		`{"model":"m",` + msgs + `,"tools":[{"type":5}]}`,
		`{"model":"m",` + msgs + `,"tools":` + strings.Replace(tools, `"type":"object"`, `"type":`, 1) + `}`,
		`[` + tools + `]`,
		``,
	}
	var c toolsCache
	for round := range 2 {
		for _, body := range bodies {
			var want Request
			wantErr := fastjson.Unmarshal([]byte(body), &want)
			got, err := c.decodeRequest([]byte(body))
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
				t.Errorf("round %d, %.80s…: got %+v, %v; want %+v, %v", round, body, got, err, want, wantErr)
			}
		}
	}
	if len(c.entries) != 3 {
		t.Errorf("%d arrays kept, want 3", len(c.entries))
	}
}

// A known array is cut out, and what a request's tools go through does
// not reach the cache.
func TestDecodeRequestShortcut(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":` + bigTools(4) + `}`)
	var c toolsCache
	first, err := c.decodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	want := first
	want.Tools = cloneTools(first.Tools)
	first.Tools[0].Function.Name = "changed"
	first.Tools[1].Function.Parameters[0] = 'X'
	first.Tools = append(first.Tools[:1], first.Tools[2:]...)
	if _, at, _ := c.cut(body); at < 0 {
		t.Fatal("the array is not found again")
	}
	for range 2 {
		got, ok := c.decodeFast(body)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, %v; want %+v", got, ok, want)
		}
		got.Tools[0].Function.Parameters[0] = 'Y'
	}
}

// The cache keeps the arrays used last.
func TestToolsCacheBound(t *testing.T) {
	var c toolsCache
	for n := range maxCachedTools + 3 {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":` + bigTools(n+4) + `}`
		if _, err := c.decodeRequest([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.entries) != maxCachedTools || len(c.entries[0].tools) != maxCachedTools+6 {
		t.Errorf("%d arrays kept, the newest of %d tools", len(c.entries), len(c.entries[0].tools))
	}
}

// Requests decoded at once, with the same tools or others, each get theirs.
func TestDecodeRequestConcurrent(t *testing.T) {
	var c toolsCache
	bodies := make([][]byte, 3)
	want := make([]Request, len(bodies))
	for i := range bodies {
		bodies[i] = []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":` + bigTools(5+i) + `}`)
		if err := fastjson.Unmarshal(bodies[i], &want[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 50 {
				i := (g + n) % len(bodies)
				got, err := c.decodeRequest(bodies[i])
				if err != nil || !reflect.DeepEqual(got, want[i]) {
					t.Errorf("body %d: got %+v, %v", i, got, err)
					return
				}
				got.Tools[0].Function.Parameters[0] = 'X'
			}
		})
	}
	wg.Wait()
}
