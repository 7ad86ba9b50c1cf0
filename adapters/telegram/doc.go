// Package telegram is firstmate's Telegram adapter.
//
// markdown.go turns the model's Markdown into the HTML that the Bot API
// accepts with parse_mode HTML ([RenderHTML]), cuts it into messages under
// Telegram's length limit with every part's tags balanced ([SplitHTML]),
// and gives the plain text to send when Telegram rejects the markup
// anyway ([PlainText], [VisibleText]).
package telegram
