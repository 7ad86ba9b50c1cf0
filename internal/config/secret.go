package config

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
)

const redactedText = "[redacted]"

// Secret is a configuration value that must not leak: an API key, a bot
// token, a signing secret, a URL with a password in it. Every way of
// printing or encoding it (every fmt verb, JSON, YAML, text, slog) yields
// "[redacted]", or "" when it is empty, so a config can be logged whole.
// Code that needs the value calls [Secret.Reveal].
//
// Decoding is not affected: a Secret reads from YAML, JSON and the
// environment like a plain string.
type Secret string

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]", or "" when s is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redactedText
}

// GoString serves %#v: [redacted], or "" when s is empty.
func (s Secret) GoString() string {
	if s == "" {
		return `""`
	}
	return redactedText
}

// Format makes every fmt verb print the redacted form. Without it a verb
// that does not fit a string, such as %d, prints the raw value.
func (s Secret) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		io.WriteString(f, s.GoString())
	case verb == 'q':
		io.WriteString(f, strconv.Quote(s.String()))
	default:
		io.WriteString(f, s.String())
	}
}

// MarshalText implements [encoding.TextMarshaler] with the redacted form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalJSON encodes the redacted form as a JSON string.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML encodes the redacted form.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// LogValue implements [slog.LogValuer] with the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
