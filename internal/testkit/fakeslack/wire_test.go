package fakeslack

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	fastjson "github.com/segmentio/encoding/json"
)

// The outer payload of an event and the envelope are written from structs;
// they are byte for byte what the maps they were written from made.
func TestWireStructsMarshalAsMaps(t *testing.T) {
	s := New(t, WithUser(User{ID: "U0OTHERBOT", Name: "otherbot", IsBot: true, BotID: "B0OTHER"}))
	dm := s.DirectMessage(Alice, "a <b> & \u2028 \xff c")
	events := []Event{
		dm,
		s.Mention(General, Bob, "<@U0BOT> look <!channel>"),
		s.BotMessage(General, "U0OTHERBOT", "beep"),
		s.UserMessage(General, Bob, "see").WithFiles(s.AddFile("a.txt", "text/plain", []byte("x"))),
		s.MessageChanged(General, dm.TS(), "edited"),
		{ID: "Ev1", Time: time.Unix(1700000000, 0)}, // no data at all
		{ID: "Ev2", Time: time.Unix(1700000000, 0), Data: map[string]any{"channel": "<C&>", "type": 7}},
	}
	for _, e := range events {
		got, err := json.Marshal(s.callback(e))
		if err != nil {
			t.Fatal(err)
		}
		ctx, _ := json.Marshal(object{"id": s.teamID, "channel": e.Channel()})
		want, _ := json.Marshal(object{
			"token": s.verificationToken, "team_id": s.teamID, "context_team_id": s.teamID,
			"api_app_id": s.appID, "event": e.Data, "type": "event_callback", "event_id": e.ID,
			"event_time": e.Time.Unix(), "is_ext_shared_channel": false,
			"event_context": "4-" + base64.RawURLEncoding.EncodeToString(ctx),
			"authorizations": []object{{
				"enterprise_id": nil, "team_id": s.teamID, "user_id": s.botUserID,
				"is_bot": true, "is_enterprise_install": false,
			}},
		})
		if !bytes.Equal(got, want) {
			t.Errorf("event callback\n got %s\nwant %s", got, want)
		}

		for _, payload := range []json.RawMessage{got, json.RawMessage(" {\"a\" : [1, \"<&>\"]}\n")} {
			env := Envelope{ID: "e-1", Type: "events_api", RetryAttempt: 2, RetryReason: "timeout", Payload: payload}
			got, err := json.Marshal(envelopeFrame{
				EnvelopeID: env.ID, Type: env.Type, Payload: env.Payload,
				AcceptsResponsePayload: true, RetryAttempt: env.RetryAttempt, RetryReason: env.RetryReason,
			})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(object{
				"envelope_id": env.ID, "type": env.Type, "payload": env.Payload,
				"accepts_response_payload": true, "retry_attempt": env.RetryAttempt, "retry_reason": env.RetryReason,
			})
			if !bytes.Equal(got, want) {
				t.Errorf("envelope\n got %s\nwant %s", got, want)
			}
		}
	}
}

// The payloads of events the fake marshals read the same with segmentio's
// decoder as with encoding/json (observeMarshaled and observe).
func TestMarshaledEventsDecodeAlike(t *testing.T) {
	s := New(t)
	dm := s.DirectMessage(Alice, "a <b> & \u2028 \xff c 😀")
	odd := dm
	odd.Data = map[string]any{
		"type": "message", "channel": "D0ALICE", "ts": "1.2", "n": 9223372036854775807, "f": 1e-7, "g": 1.5e300,
		"nested": []any{map[string]any{"x": []int{1, 2}}, nil, true, math.Copysign(0, -1)},
		"raw":    json.RawMessage(`{"a":"\/\u00e9\ud800\ud83d\ude00\udc00x","b":[1.0,2E3]}`),
		"blocks": []object{{"type": "rich_text", "elements": []object{{"type": "text", "text": "\x01\x7f\u00a0"}}}},
	}
	for _, e := range []Event{dm, s.Mention(General, Bob, "<@U0BOT> hi"), s.MessageChanged(General, dm.TS(), "edited"), odd} {
		payload, err := json.Marshal(s.callback(e))
		if err != nil {
			t.Fatal(err)
		}
		var std, fast eventOuter
		if err := json.Unmarshal(payload, &std); err != nil {
			t.Fatal(err)
		}
		if err := fastjson.Unmarshal(payload, &fast); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(std, fast) {
			t.Errorf("%s:\n encoding/json %#v\n     segmentio %#v", payload, std, fast)
		}
	}
}
