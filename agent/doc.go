// Package agent is firstmate's core: the neutral message and event types, the
// agent loop that alternates model calls and tool calls, and the Dispatcher
// that turns incoming messages into turns, one session at a time.
//
// agent knows no chat platform, no LLM SDK and no database. Adapters translate
// platform events into [Inbound] and render [Event]s through a [Thread];
// agent/openai implements [Model]; store/redis and store/local implement
// [Store]. A test keeps this package free of their imports.
package agent
