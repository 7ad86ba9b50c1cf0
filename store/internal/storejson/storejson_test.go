package storejson

import (
	"encoding/json"
	"testing"
)

func TestMarshal(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{map[string]string{"t": "a<b>&c"}, `{"t":"a<b>&c"}`},
		{json.RawMessage(`{"x": [1, 2]}`), `{"x":[1,2]}`},
		{[]int(nil), `null`},
		{"\u2028", `"\u2028"`},
	} {
		got, err := Marshal(tc.in)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", tc.in, err)
		}
		if string(got) != tc.want {
			t.Errorf("Marshal(%#v) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Error("Marshal of a func succeeded")
	}
}
