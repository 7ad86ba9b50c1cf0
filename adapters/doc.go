// Package adapters holds what the chat adapters share and no platform owns:
// the progress message of a turn ([Progress]), coalesced edits of one
// message ([Throttle]), and splitting Markdown to a platform's size limit
// ([Split]).
//
// It knows the agent's events and nothing of Slack, Telegram or the stores;
// a test keeps it that way. Text it produces is plain: each adapter escapes
// or formats it for its platform.
package adapters
