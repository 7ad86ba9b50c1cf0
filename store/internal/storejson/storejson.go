// Package storejson is the JSON encoding the stores write records in, kept
// in one place so that store/local and store/redis store the same bytes.
package storejson

import (
	"bytes"
	"encoding/json"
)

// Marshal encodes v as compact JSON without HTML escaping, so text and tool
// arguments are stored as they came.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
