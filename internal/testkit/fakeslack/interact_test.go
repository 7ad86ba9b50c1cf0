package fakeslack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/firstmate/firstmate/internal/testkit/fakeslack"
)

func question() []slack.Block {
	return []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "May I run shell?", false, false), nil, nil),
		slack.NewActionBlock("row_0",
			slack.NewButtonBlockElement("fm_0", "fm:ok:1", slack.NewTextBlockObject(slack.PlainTextType, "Approve", true, false)).WithStyle(slack.StylePrimary),
			slack.NewButtonBlockElement("fm_1", "fm:no:1", slack.NewTextBlockObject(slack.PlainTextType, "Deny", true, false)).WithStyle(slack.StyleDanger)),
	}
}

func TestButtonsAndBlockLimits(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	api := newAPI(srv)
	_, ts, err := api.PostMessage(fakeslack.General, slack.MsgOptionBlocks(question()...), slack.MsgOptionText("May I run shell?", false))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := srv.Message(fakeslack.General, ts)
	b := m.Buttons()
	if len(b) != 2 || b[0] != (fakeslack.Button{BlockID: "row_0", ActionID: "fm_0", Text: "Approve", Value: "fm:ok:1", Style: "primary"}) || b[1].Style != "danger" {
		t.Fatalf("buttons %+v", b)
	}
	// An update with "blocks=[]" removes them; one without blocks keeps them.
	if _, _, _, err := api.UpdateMessage(fakeslack.General, ts, slack.MsgOptionText("still asking", false)); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(fakeslack.General, ts); len(m.Buttons()) != 2 {
		t.Errorf("an update without blocks dropped them: %+v", m)
	}
	if _, _, _, err := api.UpdateMessage(fakeslack.General, ts, slack.MsgOptionText("decided", false), slack.MsgOptionBlocks()); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(fakeslack.General, ts); m.Blocks != nil || m.Text != "decided" || m.Edits != 2 {
		t.Errorf("after blocks=[]: %+v", m)
	}
	// Ephemeral messages keep their buttons too.
	ets, err := api.PostEphemeral(fakeslack.General, fakeslack.Bob, slack.MsgOptionBlocks(question()...), slack.MsgOptionText("q", false))
	if err != nil {
		t.Fatal(err)
	}
	if e := srv.Ephemerals(); len(e) != 1 || e[0].TS != ets || len(e[0].Buttons()) != 2 {
		t.Errorf("ephemerals %+v", e)
	}

	button := func(id, text, style string) *slack.ButtonBlockElement {
		b := slack.NewButtonBlockElement(id, "v", slack.NewTextBlockObject(slack.PlainTextType, text, true, false))
		b.Style = slack.Style(style)
		return b
	}
	var many []slack.BlockElement
	for i := range 26 {
		many = append(many, button("b"+string(rune('a'+i)), "x", ""))
	}
	for name, blocks := range map[string][]slack.Block{
		"26 elements":         {slack.NewActionBlock("a", many...)},
		"same action_id":      {slack.NewActionBlock("a", button("x", "one", ""), button("x", "two", ""))},
		"same block_id":       {slack.NewActionBlock("a", button("x", "one", "")), slack.NewActionBlock("a", button("y", "two", ""))},
		"long button":         {slack.NewActionBlock("a", button("x", strings.Repeat("x", 76), ""))},
		"unknown style":       {slack.NewActionBlock("a", button("x", "one", "green"))},
		"empty actions":       {slack.NewActionBlock("a")},
		"section over 3000":   {slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, strings.Repeat("x", 3001), false, false), nil, nil)},
		"button without text": {slack.NewActionBlock("a", button("x", "", ""))},
	} {
		if _, _, err := api.PostMessage(fakeslack.General, slack.MsgOptionBlocks(blocks...)); slackError(err) != "invalid_blocks" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestUsersInfoAdminsAndTeams(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t,
		fakeslack.WithUser(fakeslack.User{ID: "U0OWNER", Name: "olga", IsOwner: true, IsPrimaryOwner: true}),
		fakeslack.WithUser(fakeslack.User{ID: "U0EXT", Name: "xavier", TeamID: "T0OTHER"}))
	api := newAPI(srv)
	u, err := api.GetUserInfo("U0OWNER")
	if err != nil || !u.IsOwner || !u.IsPrimaryOwner || u.IsAdmin || u.TeamID != srv.TeamID() {
		t.Errorf("owner %+v, %v", u, err)
	}
	if u, err := api.GetUserInfo("U0EXT"); err != nil || u.TeamID != "T0OTHER" {
		t.Errorf("external %+v, %v", u, err)
	}
	srv.SetUser(fakeslack.User{ID: fakeslack.Alice, Name: "alice"})
	if u, _ := api.GetUserInfo(fakeslack.Alice); u.IsAdmin {
		t.Error("SetUser did not demote alice")
	}

	// Another team's person writes with user_team and source_team.
	events := make(chan socketmode.Event, 5)
	startSocket(t, srv, ackAll(events))
	srv.SendEvent(srv.Mention(fakeslack.General, "U0EXT", "hello from outside"))
	ev := receive(t, events).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppMentionEvent)
	if ev.UserTeam != "T0OTHER" || ev.SourceTeam != "T0OTHER" {
		t.Errorf("external mention %+v", ev)
	}
	srv.SendEvent(srv.UserMessage(fakeslack.General, fakeslack.Bob, "hello from inside"))
	msg := receive(t, events).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if msg.UserTeam != "" || msg.Message.Team != srv.TeamID() {
		t.Errorf("member's message %+v", msg)
	}
}

func modal(withInput bool) slack.ModalViewRequest {
	m := slack.ModalViewRequest{
		Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "Tools here", true, false),
		CallbackID: "fm_tools", PrivateMetadata: `{"v":1}`,
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "hi", false, false), nil, nil)}},
	}
	if withInput {
		opt := func(v string) *slack.OptionBlockObject {
			return slack.NewOptionBlockObject(v, slack.NewTextBlockObject(slack.PlainTextType, v, true, false), nil)
		}
		sel := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, nil, "mode", opt("allow"), opt("ask"), opt("deny"))
		sel.InitialOption = opt("ask")
		m.Blocks.BlockSet = append(m.Blocks.BlockSet, slack.NewInputBlock("g:exec", slack.NewTextBlockObject(slack.PlainTextType, "exec", true, false), nil, sel))
		m.Submit = slack.NewTextBlockObject(slack.PlainTextType, "Save", true, false)
	}
	return m
}

func TestViewsOpenAndSubmit(t *testing.T) {
	t.Parallel()
	srv := fakeslack.New(t)
	api := newAPI(srv)
	if _, err := api.OpenView("no.such.trigger", modal(true)); slackError(err) != "invalid_trigger_id" {
		t.Errorf("unknown trigger: %v", err)
	}
	cmd := srv.SlashCommand(fakeslack.General, fakeslack.Alice, "/firstmate", "tools")
	noSubmit := modal(true)
	noSubmit.Submit = nil
	if _, err := api.OpenView(cmd.TriggerID, noSubmit); slackError(err) != "invalid_arguments" {
		t.Errorf("inputs without submit: %v", err)
	}
	long := modal(false)
	long.Title.Text = strings.Repeat("x", 25)
	if _, err := api.OpenView(cmd.TriggerID, long); slackError(err) != "invalid_arguments" {
		t.Errorf("long title: %v", err)
	}
	resp, err := api.OpenView(cmd.TriggerID, modal(true))
	if err != nil || resp.ID == "" || resp.CallbackID != "fm_tools" || resp.PrivateMetadata != `{"v":1}` {
		t.Fatalf("views.open = %+v, %v", resp, err)
	}
	if _, err := api.OpenView(cmd.TriggerID, modal(true)); slackError(err) != "exchanged_trigger_id" {
		t.Errorf("a trigger used twice: %v", err)
	}
	views := srv.Views()
	if len(views) != 1 || views[0].ID != resp.ID || views[0].User != fakeslack.Alice || views[0].Submit != "Save" || views[0].Title != "Tools here" {
		t.Fatalf("views %+v", views)
	}
	sels := views[0].Selects()
	if len(sels) != 1 || sels[0].BlockID != "g:exec" || sels[0].ActionID != "mode" || sels[0].Initial != "ask" || len(sels[0].Options) != 3 {
		t.Errorf("selects %+v", sels)
	}

	if _, err := srv.SubmitView(resp.ID, fakeslack.Alice, map[string]string{"g:exec": "never"}); err == nil {
		t.Error("a value that is not an option was submitted")
	}
	if _, err := srv.SubmitView(resp.ID, fakeslack.Alice, map[string]string{"g:nope": "deny"}); err == nil {
		t.Error("an unknown block was submitted")
	}
	ia, err := srv.SubmitView(resp.ID, fakeslack.Alice, map[string]string{"g:exec": "deny"})
	if err != nil {
		t.Fatal(err)
	}
	// slack-go reads it, over Socket Mode, and the ack carries the answer.
	got := make(chan slack.InteractionCallback, 1)
	startSocket(t, srv, func(sm *socketmode.Client, ev socketmode.Event) {
		if ev.Type == socketmode.EventTypeInteractive {
			_ = sm.Ack(*ev.Request, slack.NewErrorsViewSubmissionResponse(map[string]string{"g:exec": "no"}))
			got <- ev.Data.(slack.InteractionCallback)
		}
	})
	id := srv.SendInteractive(ia)
	cb := receive(t, got)
	if cb.Type != slack.InteractionTypeViewSubmission || cb.User.ID != fakeslack.Alice || cb.View.ID != resp.ID || cb.View.PrivateMetadata != `{"v":1}` ||
		cb.View.State.Values["g:exec"]["mode"].SelectedOption.Value != "deny" || cb.View.CallbackID != "fm_tools" {
		t.Errorf("view_submission %+v", cb)
	}
	var initial string
	for _, b := range cb.View.Blocks.BlockSet {
		if in, ok := b.(*slack.InputBlock); ok {
			initial = in.Element.(*slack.SelectBlockElement).InitialOption.Value
		}
	}
	if initial != "ask" {
		t.Errorf("the submitted view's blocks lost the initial option: %q", initial)
	}
	ack, ok := srv.WaitAck(id, wait)
	var answer slack.ViewSubmissionResponse
	if !ok || json.Unmarshal(ack.Payload, &answer) != nil || answer.ResponseAction != slack.RAErrors {
		t.Errorf("ack %+v", ack)
	}

	// A trigger expires after three seconds.
	old := srv.SlashCommand(fakeslack.General, fakeslack.Alice, "/firstmate", "tools")
	time.Sleep(3100 * time.Millisecond)
	if _, err := api.OpenView(old.TriggerID, modal(false)); slackError(err) != "expired_trigger_id" {
		t.Errorf("an old trigger: %v", err)
	}
	// A read-only modal has no submit to send.
	cmd = srv.SlashCommand(fakeslack.General, fakeslack.Bob, "/firstmate", "tools")
	ro, err := api.OpenView(cmd.TriggerID, modal(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SubmitView(ro.ID, fakeslack.Bob, nil); err == nil {
		t.Error("a view without a submit button was submitted")
	}
}

func TestClickPayloadsAndResponseURL(t *testing.T) {
	t.Parallel()
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	srv := fakeslack.New(t)
	api := newAPI(srv)
	root := srv.AddMessage(fakeslack.Message{Channel: fakeslack.General, User: fakeslack.Bob, Text: "go"})
	_, ts, err := api.PostMessage(fakeslack.General, slack.MsgOptionBlocks(question()...), slack.MsgOptionText("q", false), slack.MsgOptionTS(root.TS))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Click(fakeslack.General, ts, fakeslack.Bob, "Maybe"); err == nil {
		t.Error("a click on a button that is not there")
	}
	ia, err := srv.Click(fakeslack.General, ts, fakeslack.Bob, "Approve")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *http.Request, 1)
	endpoint := eventsEndpoint(t, secret, got)
	if d := mustDeliver(t, srv, endpoint, ia, secret); d.Status != http.StatusOK {
		t.Fatalf("delivered: %+v", d)
	}
	cb, err := slack.InteractionCallbackParse(receive(t, got))
	if err != nil {
		t.Fatal(err)
	}
	act := cb.ActionCallback.BlockActions
	if cb.Type != slack.InteractionTypeBlockActions || cb.User.ID != fakeslack.Bob || cb.User.Name != "bob" || cb.User.TeamID != srv.TeamID() ||
		cb.Team.ID != srv.TeamID() || cb.Channel.ID != fakeslack.General || cb.Channel.Name != "general" ||
		cb.Container.MessageTs != ts || cb.Container.ThreadTs != root.TS || cb.Container.IsEphemeral ||
		cb.Message.Timestamp != ts || cb.Message.ThreadTimestamp != root.TS || cb.TriggerID == "" || cb.ResponseURL == "" ||
		len(act) != 1 || act[0].ActionID != "fm_0" || act[0].BlockID != "row_0" || act[0].Value != "fm:ok:1" {
		t.Fatalf("block_actions %+v", cb)
	}
	// Its trigger opens a modal; its response_url replaces the message.
	if _, err := api.OpenView(cb.TriggerID, modal(false)); err != nil {
		t.Errorf("views.open with a click's trigger: %v", err)
	}
	if _, _, _, err := api.SendMessage("", slack.MsgOptionReplaceOriginal(cb.ResponseURL), slack.MsgOptionText("approved", false), slack.MsgOptionBlocks()); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message(fakeslack.General, ts); m.Text != "approved" || m.Blocks != nil || m.Edits != 1 {
		t.Errorf("after replace_original: %+v", m)
	}

	// An ephemeral message: only its person can click it, and its
	// response_url is the only way to change it.
	ets, err := api.PostEphemeral(fakeslack.General, fakeslack.Alice, slack.MsgOptionBlocks(question()...), slack.MsgOptionText("q", false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Click(fakeslack.General, ets, fakeslack.Bob, "Deny"); err == nil {
		t.Error("bob clicked alice's ephemeral message")
	}
	ia, err = srv.Click(fakeslack.General, ets, fakeslack.Alice, "fm_1")
	if err != nil {
		t.Fatal(err)
	}
	mustDeliver(t, srv, endpoint, ia, secret)
	cb, _ = slack.InteractionCallbackParse(receive(t, got))
	if !cb.Container.IsEphemeral || cb.Container.MessageTs != ets || cb.Message.Timestamp != "" || cb.ActionCallback.BlockActions[0].Value != "fm:no:1" {
		t.Fatalf("ephemeral block_actions %+v", cb)
	}
	if _, _, _, err := api.SendMessageContext(context.Background(), "", slack.MsgOptionReplaceOriginal(cb.ResponseURL), slack.MsgOptionText("denied", false)); err != nil {
		t.Fatal(err)
	}
	if e := srv.Ephemerals(); len(e) != 1 || e[0].Text != "denied" || e[0].Edits != 1 {
		t.Errorf("after replace_original: %+v", e)
	}
	if _, _, _, err := api.SendMessageContext(context.Background(), "", slack.MsgOptionDeleteOriginal(cb.ResponseURL)); err != nil {
		t.Fatal(err)
	}
	if e := srv.Ephemerals(); !e[0].Deleted {
		t.Errorf("after delete_original: %+v", e)
	}
}
