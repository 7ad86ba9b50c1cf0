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
// always answered with answerCallbackQuery (callback.go). With
// Config.ChatAdmins a group's Telegram administrators count as the bot's
// admins there (admins.go).
package telegram
