package fakellm_test

import (
	"context"
	"testing"

	"github.com/firstmate/firstmate/internal/testkit/fakellm"
)

// WithoutRecording answers as usual and keeps nothing.
func TestWithoutRecording(t *testing.T) {
	srv := fakellm.New(t, fakellm.WithoutRecording(), fakellm.WithReplies(fakellm.Text("one"), fakellm.Text("two")))
	c := client(srv, "")
	for _, want := range []string{"one", "two"} {
		resp, err := c.CreateChatCompletion(context.Background(), chatReq(false))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != want {
			t.Errorf("answer %q, want %q", got, want)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests recorded", n)
	}
}
