// Package redact masks the credentials in URLs, for text that leaves the
// process: doctor's output, logs and errors. A URL configured by the
// operator (the model's base URL, the search engine's) may carry a
// password or an API key, and net/http quotes the whole URL in its errors
// ("Post \"https://host/v1?key=…\": dial tcp …").
//
// It imports only the standard library, so that every package (the core
// and tools included) may use it.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

const (
	// Mask replaces a password or a secret parameter's value, as
	// url.URL.Redacted and the Redis URL's redaction write it.
	Mask = "xxxxx"
	// Whole replaces a URL that cannot be taken apart: its secrets could
	// not be told from the rest.
	Whole = "[redacted]"
)

// URL returns raw with its credentials masked, and raw itself when it has
// none:
//
//   - the user info: a password becomes [Mask] and the user name stays;
//     a user name without a password becomes [Mask] (https://TOKEN@host is
//     how many services take a token);
//   - a query parameter whose name looks secret gets the value [Mask],
//     every time it occurs; so does a parameter in a fragment written as
//     parameters (#access_token=…, as OAuth returns it);
//   - a URL that does not parse, or that parses into something other than
//     what it must have meant (a password holding an unescaped '/', '?'
//     or '#' ends the host early; "user:pw@host" without "//" reads as
//     the scheme "user"), becomes [Whole].
//
// A name looks secret when, decoded ("%6Bey" is key, "+" a space), lower
// case and with every other character than a letter or digit read as
// '_', it holds token, secret, passw (password, passwd), signature,
// credential or apikey; or ends in key (key, api_key, x_api_key) or sig;
// or is auth, authorization, pass, pwd or jwt. Parameters are separated
// by '&' or ';', since servers read either. A parameter whose name cannot
// be decoded is masked whole.
func URL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Whole
	}
	if strings.Contains(u.Opaque, "@") {
		return Whole
	}
	if u.User == nil && u.Port() != "" && strings.Contains(u.Path+u.RawQuery+u.Fragment, "@") {
		// "https://user:123/x@host": the password's digits read as a port.
		return Whole
	}
	changed := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
			changed = true
		} else if u.User.Username() != "" {
			u.User = url.User(Mask)
			changed = true
		}
	}
	if q, ok := params(u.RawQuery); ok {
		u.RawQuery, changed = q, true
	}
	frag, fragChanged := params(u.EscapedFragment())
	if !changed && !fragChanged {
		return raw // unchanged, not re-encoded
	}
	u.Fragment, u.RawFragment = "", ""
	s := u.String()
	if frag != "" {
		s += "#" + frag
	}
	return s
}

// Query returns a raw query (or a fragment written as parameters) with
// the values of its secret parameters masked as [URL] masks them, for a
// URL that [URL] cannot parse but its own parser can (a Redis URL that
// lists several hosts).
func Query(raw string) string {
	q, _ := params(raw)
	return q
}

// params is Query, also reporting whether it masked anything.
func params(raw string) (string, bool) {
	if raw == "" {
		return raw, false
	}
	var b strings.Builder
	changed := false
	start := 0
	for i := 0; i <= len(raw); i++ {
		if i < len(raw) && raw[i] != '&' && raw[i] != ';' {
			continue
		}
		p := param(raw[start:i])
		changed = changed || p != raw[start:i]
		b.WriteString(p)
		if i < len(raw) {
			b.WriteByte(raw[i])
		}
		start = i + 1
	}
	return b.String(), changed
}

// param masks one name=value pair if its name looks secret.
func param(p string) string {
	name, _, hasValue := strings.Cut(p, "=")
	decoded, err := url.QueryUnescape(name)
	if err != nil {
		return Mask
	}
	// An escaped '=' ("key%3Dsecret") puts the value in the name.
	if before, _, ok := strings.Cut(decoded, "="); ok && secretName(before) {
		return url.QueryEscape(before) + "=" + Mask
	}
	if hasValue && secretName(decoded) {
		return name + "=" + Mask
	}
	return p
}

func secretName(name string) bool {
	n := strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, name), "_")
	for _, s := range []string{"token", "secret", "passw", "signature", "credential", "apikey"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	switch n {
	case "auth", "authorization", "pass", "pwd", "jwt":
		return true
	}
	return strings.HasSuffix(n, "key") || strings.HasSuffix(n, "sig")
}

// Error returns err with the URL of the *url.Error it holds redacted by
// [URL], and err itself when there is nothing to redact. A *url.Error is
// copied. An error that wraps one (go-openai's, a fmt.Errorf %w) gets a
// message with the URL redacted; it unwraps to the redacted copy first,
// so errors.As finds that, and then to err, so errors.Is and errors.As
// still see everything err holds.
func Error(err error) error {
	r, _ := redactError(err)
	return r
}

// redactError is Error, also reporting whether it changed anything.
func redactError(err error) (error, bool) {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err, false
	}
	// A *url.Error inside ue.Err (a redirect's) is redacted too.
	inner, innerChanged := redactError(ue.Err)
	r := URL(ue.URL)
	if r == ue.URL && !innerChanged {
		return err, false
	}
	c := &url.Error{Op: ue.Op, URL: r, Err: inner}
	if _, ok := err.(*url.Error); ok {
		return c, true
	}
	msg := strings.ReplaceAll(err.Error(), ue.Error(), c.Error())
	if r != ue.URL {
		// A wrapper that quoted the URL its own way.
		msg = strings.ReplaceAll(msg, ue.URL, r)
	}
	return &redactedError{msg: msg, errs: []error{c, err}}, true
}

type redactedError struct {
	msg  string
	errs []error
}

func (e *redactedError) Error() string   { return e.msg }
func (e *redactedError) Unwrap() []error { return e.errs }
