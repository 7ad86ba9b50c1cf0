// Package telegram is firstmate's Telegram adapter.
//
// markdown.go turns the model's Markdown into the HTML that the Bot API
// accepts with parse_mode HTML ([RenderHTML]), cuts it into messages under
// Telegram's length limit with every part's tags balanced ([SplitHTML]),
// and gives the plain text to send when Telegram rejects the markup
// anyway ([PlainText], [VisibleText]).
//
// Buttons (approval questions, the policy screen) are inline keyboards;
// a click arrives as a callback_query, goes to adapters.HandleClick and is
// always answered with answerCallbackQuery (callback.go). The policy
// screen keeps within Telegram's limits (adapters/clicks.go): pages of at
// most 48 buttons, and a rule too long for callback_data's 64 bytes (a
// long skill or MCP name) named by a hash the click resolves. With
// Config.ChatAdmins a group's Telegram administrators count as the bot's
// admins there (admins.go).
//
// Telegram serves one getUpdates consumer per bot and answers a second
// one 409 Conflict, so replicas sharing a token take turns (poll.go): with
// Config.PollLease the holder of the lease "telegram-poll:<bot ID>" polls
// and renews it from a goroutine that ends the long poll the moment the
// lease is lost or cannot be renewed; the others stand by and take over
// when it drops the lease at shutdown or lets it expire. The offset moves
// only past submitted updates and is confirmed before the lease is
// dropped, so a hand-over loses nothing and repeats nothing. A webhook
// needs no lease: every replica serves it.
package telegram
