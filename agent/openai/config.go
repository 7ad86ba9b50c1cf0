package openai

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/firstmate/firstmate/internal/redact"
)

// ToolProtocol is how tools are offered to the model and how it calls them.
type ToolProtocol string

const (
	// ToolsNative uses the API's tools field and tool_calls (the default).
	ToolsNative ToolProtocol = "native"
	// ToolsText describes the tools in the system prompt and reads
	// "[TOOL] name(args) [/TOOL]" calls from the reply text, for models
	// and servers without native tool calling.
	ToolsText ToolProtocol = "text"
)

// Defaults for the zero values of [Config].
const (
	DefaultBaseURL      = "https://api.openai.com/v1"
	DefaultMaxRetries   = 4
	DefaultTimeout      = 3 * time.Minute
	DefaultStallTimeout = time.Minute
	// DefaultMaxResponseBytes is far above any real reply (a 128k-token
	// answer is about 512 KiB) and far below what hurts the process.
	DefaultMaxResponseBytes = 1 << 20
	DefaultRetryBase        = time.Second
	DefaultMaxRetryWait     = time.Minute
	// maxBackoff caps one exponential backoff wait.
	maxBackoff = 30 * time.Second
)

// Config configures a [Model]. Only Model is required.
type Config struct {
	// BaseURL is the API root including its version, e.g.
	// http://localhost:11434/v1 for Ollama; DefaultBaseURL if empty.
	BaseURL string
	// APIKey is sent as a bearer token. Local servers may need none.
	APIKey string
	// Model is the model name the server knows, e.g. "gpt-4o-mini" or
	// "qwen2.5:7b".
	Model string
	// ToolProtocol is ToolsNative (the default) or ToolsText.
	ToolProtocol ToolProtocol

	// MaxRetries is how many times a failed call is retried: 0 means
	// DefaultMaxRetries, a negative value means never.
	MaxRetries int
	// Timeout bounds how long one attempt may wait for the model's output
	// to begin: for the response, and then between the pieces that carry
	// no output yet (a role, a content-filter note), as a model may think
	// for minutes first. 0 means DefaultTimeout.
	Timeout time.Duration
	// StallTimeout bounds the pause between two pieces of the stream once
	// the output has begun (text, reasoning or a tool call); a long answer
	// that keeps streaming is never cut. 0 means DefaultStallTimeout.
	StallTimeout time.Duration
	// RetryBase is the first backoff step; each retry doubles it (capped
	// at 30s) and waits a random time up to it. 0 means DefaultRetryBase.
	RetryBase time.Duration
	// MaxRetryWait is the longest Retry-After the model waits for; a server
	// that asks for more fails the call at once with a *agent.ModelError
	// carrying RetryAfter. 0 means DefaultMaxRetryWait.
	MaxRetryWait time.Duration
	// OnRetryAfter, if set, hears each Retry-After the server sends with
	// a failed attempt, before the call waits it out: the model's limits
	// (agent/modellimit) pause every other call for as long.
	OnRetryAfter func(time.Duration)

	// HTTPClient sends the requests; a client without a Timeout (which
	// would cut long streams) is built when nil.
	HTTPClient *http.Client

	// Temperature, if set, is sent as the sampling temperature (0 to 2).
	Temperature *float64
	// MaxTokens, if positive, caps the length of a reply.
	MaxTokens int
	// MaxResponseBytes caps one reply: its text and all its tool calls
	// (names and arguments) together, counted as they arrive. The bytes
	// around it are bounded by multiples of it: the stream as a whole at
	// 64 times (its JSON framing outweighs the text it carries), one event
	// of the stream, and the bytes outside events, at 4 times; a body that
	// is not a stream (the model list) at 4 times. 0 means
	// DefaultMaxResponseBytes. See limit.go.
	MaxResponseBytes int
}

// ConfigError is a [Config] that [New] refused.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("openai: invalid config: %s %s", e.Field, e.Problem)
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	c.BaseURL = strings.TrimRight(strings.TrimSpace(c.BaseURL), "/")
	// The messages show the URL redacted: it may hold a password or a key
	// (and url.Parse's error quotes it whole).
	u, err := url.Parse(c.BaseURL)
	switch shown := redact.URL(c.BaseURL); {
	case err != nil:
		return c, &ConfigError{"BaseURL", fmt.Sprintf("%q is not a valid URL; write it like https://host/v1", shown)}
	case u.Scheme != "http" && u.Scheme != "https":
		return c, &ConfigError{"BaseURL", fmt.Sprintf("%q must start with http:// or https:// (e.g. http://localhost:11434/v1)", shown)}
	case u.Host == "":
		return c, &ConfigError{"BaseURL", fmt.Sprintf("%q has no host", shown)}
	case u.RawQuery != "" || u.Fragment != "":
		return c, &ConfigError{"BaseURL", fmt.Sprintf("%q must not have a query or fragment", shown)}
	}
	if u.Hostname() == "api.openai.com" && c.APIKey == "" {
		return c, &ConfigError{"APIKey", "is required for api.openai.com"}
	}
	c.Model = strings.TrimSpace(c.Model)
	if c.Model == "" {
		return c, &ConfigError{"Model", "is empty; name the model the server should run"}
	}
	switch c.ToolProtocol {
	case "":
		c.ToolProtocol = ToolsNative
	case ToolsNative, ToolsText:
	default:
		return c, &ConfigError{"ToolProtocol", fmt.Sprintf("%q is not %q or %q", c.ToolProtocol, ToolsNative, ToolsText)}
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.Timeout < 0 || c.RetryBase < 0 || c.MaxRetryWait < 0 {
		return c, &ConfigError{"Timeout, RetryBase and MaxRetryWait", "must not be negative"}
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.StallTimeout < 0:
		return c, &ConfigError{"StallTimeout", "must not be negative"}
	case c.StallTimeout == 0:
		c.StallTimeout = DefaultStallTimeout
	}
	switch {
	case c.MaxResponseBytes < 0:
		return c, &ConfigError{"MaxResponseBytes", "must not be negative"}
	case c.MaxResponseBytes == 0:
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.RetryBase == 0 {
		c.RetryBase = DefaultRetryBase
	}
	if c.MaxRetryWait == 0 {
		c.MaxRetryWait = DefaultMaxRetryWait
	}
	if t := c.Temperature; t != nil && (*t < 0 || *t > 2) {
		return c, &ConfigError{"Temperature", fmt.Sprintf("%v is outside 0 to 2", *t)}
	}
	if c.MaxTokens < 0 {
		return c, &ConfigError{"MaxTokens", "must not be negative"}
	}
	return c, nil
}
