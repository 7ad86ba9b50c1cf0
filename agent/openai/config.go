package openai

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
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
	DefaultRetryBase    = time.Second
	DefaultMaxRetryWait = time.Minute
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
	// Timeout bounds how long one attempt may wait for the server to start
	// answering, and then for each next piece of the stream; a long answer
	// that keeps streaming is never cut. 0 means DefaultTimeout.
	Timeout time.Duration
	// RetryBase is the first backoff step; each retry doubles it (capped
	// at 30s) and waits a random time up to it. 0 means DefaultRetryBase.
	RetryBase time.Duration
	// MaxRetryWait is the longest Retry-After the model waits for; a server
	// that asks for more fails the call at once with a *agent.ModelError
	// carrying RetryAfter. 0 means DefaultMaxRetryWait.
	MaxRetryWait time.Duration

	// HTTPClient sends the requests; a client without a Timeout (which
	// would cut long streams) is built when nil.
	HTTPClient *http.Client

	// Temperature, if set, is sent as the sampling temperature (0 to 2).
	Temperature *float64
	// MaxTokens, if positive, caps the length of a reply.
	MaxTokens int
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
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil:
		return c, &ConfigError{"BaseURL", fmt.Sprintf("%q is not a URL: %v", c.BaseURL, err)}
	case u.Scheme != "http" && u.Scheme != "https":
		return c, &ConfigError{"BaseURL", fmt.Sprintf("%q must start with http:// or https:// (e.g. http://localhost:11434/v1)", c.BaseURL)}
	case u.Host == "":
		return c, &ConfigError{"BaseURL", fmt.Sprintf("%q has no host", c.BaseURL)}
	case u.RawQuery != "" || u.Fragment != "":
		return c, &ConfigError{"BaseURL", fmt.Sprintf("%q must not have a query or fragment", c.BaseURL)}
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
