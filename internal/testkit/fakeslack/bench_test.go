//go:build unix

package fakeslack_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/firstmate/firstmate/internal/cputime"
	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
)

// discard is a ResponseWriter that keeps nothing, so that a benchmark
// measures the fake and not a recorder's buffer.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// call makes a Web API call with a form, as slack-go does, straight into
// the fake's handler.
func call(srv *fakeslack.Server, w *discard, method, form string) {
	r := httptest.NewRequest(http.MethodPost, "/api/"+method, strings.NewReader(form))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	clear(w.h)
	srv.ServeHTTP(w, r)
}

// ackingClient is a bare Socket Mode client that acks every envelope.
func ackingClient(b *testing.B, srv *fakeslack.Server) {
	r := httptest.NewRequest(http.MethodPost, "/api/apps.connections.open", nil)
	r.Header.Set("Authorization", "Bearer "+srv.AppToken())
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, r)
	var open struct{ URL string }
	if err := json.Unmarshal(rec.Body.Bytes(), &open); err != nil || open.URL == "" {
		b.Fatalf("apps.connections.open: %s", rec.Body)
	}
	ws, _, err := websocket.DefaultDialer.Dial(open.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			_, frame, err := ws.ReadMessage()
			if err != nil {
				return
			}
			_, id, ok := bytes.Cut(frame, []byte(`"envelope_id":"`))
			if !ok {
				continue // hello
			}
			id, _, _ = bytes.Cut(id, []byte(`"`))
			if ws.WriteMessage(websocket.TextMessage, []byte(`{"envelope_id":"`+string(id)+`"}`)) != nil {
				return
			}
		}
	})
	b.Cleanup(func() {
		ws.Close()
		wg.Wait()
	})
	if !srv.WaitConnections(1, wait) {
		b.Fatal("no connection")
	}
}

// The load generator's message: a person's DM, delivered over Socket
// Mode and acked.
func BenchmarkSendEvent(b *testing.B) {
	srv := fakeslack.New(b, fakeslack.WithUser(fakeslack.User{ID: "U0LOAD000001", Name: "person1", RealName: "Person 1"}))
	ackingClient(b, srv)
	b.ReportAllocs()
	cpu := cputime.Start()
	for b.Loop() {
		srv.SendEvent(srv.DirectMessage("U0LOAD000001", "q-000001-00001 what is in the workspace?"))
	}
	cpu.Report(b)
}

// The Web API calls of the load generator's turn, spread over the DMs of
// many people as the load's are.
func BenchmarkWebAPI(b *testing.B) {
	const people = 1000
	var opts []fakeslack.Option
	for n := range people {
		opts = append(opts, fakeslack.WithUser(fakeslack.User{ID: fmt.Sprintf("U0LOAD%06d", n), Name: fmt.Sprintf("person%d", n)}))
	}
	srv := fakeslack.New(b, opts...)
	w := &discard{h: http.Header{}}
	token := "&token=" + srv.BotToken()
	dms := make([]fakeslack.Event, people)
	for n := range dms {
		dms[n] = srv.DirectMessage(fmt.Sprintf("U0LOAD%06d", n), "hi")
		srv.SendEvent(dms[n])
	}
	// each runs call i of a benchmark.
	each := func(b *testing.B, call func(i int)) {
		b.ReportAllocs()
		cpu := cputime.Start()
		i := 0
		for b.Loop() {
			call(i)
			i++
		}
		cpu.Report(b)
	}
	b.Run("postMessage", func(b *testing.B) {
		text := "&text=" + url.QueryEscape("✓ ls · listed /workspace (0 entries) · &lt;0.1 s\nworking · 0 s") + token
		each(b, func(i int) { call(srv, w, "chat.postMessage", "channel="+dms[i%people].Channel()+text) })
	})
	b.Run("postMessage-blocks", func(b *testing.B) {
		form := url.Values{
			"text":   {"*Done.* The workspace is empty. ans-000001-00001"},
			"blocks": {`[{"type":"markdown","text":"**Done.** The workspace is empty. ans-000001-00001"}]`},
		}.Encode() + token
		each(b, func(i int) { call(srv, w, "chat.postMessage", "channel="+dms[i%people].Channel()+"&"+form) })
	})
	b.Run("reactions", func(b *testing.B) {
		each(b, func(i int) {
			dm := dms[i%people]
			form := "channel=" + dm.Channel() + "&name=white_check_mark&timestamp=" + dm.TS() + token
			call(srv, w, "reactions.add", form)
			call(srv, w, "reactions.remove", form)
		})
	})
	b.Run("users.info", func(b *testing.B) {
		each(b, func(i int) {
			call(srv, w, "users.info", fmt.Sprintf("include_locale=true&user=U0LOAD%06d", i%people)+token)
		})
	})
}
