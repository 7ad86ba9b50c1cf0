// Package adapters holds what every chat platform shares and none owns:
// the [Renderer], the one implementation of what a person sees of a turn
// (sign of life, progress, the answer as it is written, the answer, files,
// errors, the end mark, pacing under the platform's limits and its 429s);
// the [Surface] a platform implements for it, with its optional abilities;
// the progress message's state ([Progress]); the Markdown layout both
// platforms' renderers share; and splitting text to a platform's size
// limit ([Split]).
//
// It knows the agent's events and nothing of Slack, Telegram or the stores;
// a test keeps it that way. Adding a platform means writing a surface, not
// a turn.
package adapters
