// Package openai implements [agent.Model] over any OpenAI-compatible chat
// completion API (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter …)
// with github.com/sashabaranov/go-openai.
//
// Replies are always streamed: text goes to the request's OnText as it
// arrives, tool-call pieces are reassembled (tolerating the ways compatible
// servers differ from OpenAI), and the token usage is read from the final
// chunk. Rate limits, server errors, timeouts and broken connections are
// retried with exponential backoff and full jitter, honouring Retry-After,
// but never once text has been shown to a person. A call that fails for
// good is a *agent.ModelError.
//
// Two tool protocols are supported. [ToolsNative] uses the API's tools and
// tool_calls. [ToolsText] is for models without native tool calling: the
// tools are described in the system prompt and the model writes
//
//	[TOOL] read("notes.md", 1, 20) [/TOOL]
//
// in its reply, which a hand-written parser reads (see parse.go for the
// grammar). Results go back as user messages in [TOOL_RESULT name id] …
// [/TOOL_RESULT] blocks.
//
// A call the model wrote but that cannot be read, in either protocol, is
// still returned as an agent.ToolCall, so the loop answers it like any
// other; its arguments are {"_parse_error": "…", "_raw": "…"}, which no
// tool accepts, and when its result is sent back to the model it is
// replaced by the parse error, so the model learns what to fix.
package openai
