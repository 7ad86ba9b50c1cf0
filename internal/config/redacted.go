package config

import (
	"bytes"
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/firstmate/firstmate/internal/redact"
	"github.com/firstmate/firstmate/store/redis/redisurl"
)

// Redacted returns the effective configuration as YAML, for doctor: the
// same keys as the config file, secrets shown as "[redacted]" when set and
// "" when not, the Redis URL with only its password masked, every other
// URL with its credentials masked (see redactURLs), and a comment on each
// value that came from the environment.
func (c *Config) Redacted() string {
	var root yaml.Node
	if err := root.Encode(c); err != nil {
		return fmt.Sprintf("# cannot show the configuration: %v\n", err)
	}
	redactURLs(&root)
	if v := lookupNode(&root, "store", "redis_url"); v != nil && c.Store.RedisURL != "" {
		v.Value = redactURL(c.Store.RedisURL.Reveal())
		v.Style = 0 // the encoder quoted "[redacted]"; let it decide anew
	}
	if c.meta != nil {
		for key, name := range c.meta.env {
			if k := lookupKeyNode(&root, key); k != nil {
				k.LineComment = "from " + name
			}
		}
	}
	var b bytes.Buffer
	b.WriteString("# effective configuration")
	if f := c.File(); f != "" {
		fmt.Fprintf(&b, " (file %s", f)
		if c.meta.fileFrom != "" {
			fmt.Fprintf(&b, ", named by %s", c.meta.fileFrom)
		}
		b.WriteString(")")
	}
	b.WriteString("; secrets redacted\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return fmt.Sprintf("# cannot show the configuration: %v\n", err)
	}
	enc.Close()
	return b.String()
}

// redactURL masks a Redis URL's passwords (the user info's and
// sentinel_password's), and the other secret-looking options (a ?token=,
// which the Redis store refuses but doctor still shows); it masks the
// whole URL if it cannot be split into its parts, since then a password
// cannot be told apart. (redact.URL alone would mask a URL that lists
// several hosts whole: url.Parse does not take them.)
func redactURL(s string) string {
	r := redisurl.Redact(s)
	if r == "" {
		return redactedText
	}
	if base, query, ok := strings.Cut(r, "?"); ok {
		r = base + "?" + redact.Query(query)
	}
	return r
}

// redactURLs masks the credentials (see redact.URL) in every URL of the
// tree: the value of each key that ends in "url" (llm.base_url,
// web.search.url, slack.api_url, telegram.webhook_url, …) and each item
// of a list under a key that ends in "urls", in whatever section, so that
// a URL setting added later is covered without being listed here.
func redactURLs(n *yaml.Node) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			redactURLs(c)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			name, v := strings.ToLower(n.Content[i].Value), n.Content[i+1]
			switch {
			case strings.HasSuffix(name, "url") && v.Kind == yaml.ScalarNode:
				redactScalar(v)
			case strings.HasSuffix(name, "urls") && v.Kind == yaml.SequenceNode:
				for _, item := range v.Content {
					if item.Kind == yaml.ScalarNode {
						redactScalar(item)
					}
				}
			default:
				redactURLs(v)
			}
		}
	}
}

func redactScalar(v *yaml.Node) {
	if r := redact.URL(v.Value); r != v.Value {
		v.Value = r
		v.Style = 0 // let the encoder quote it anew
	}
}

// lookupNode returns the value node at the keys in a mapping tree.
func lookupNode(n *yaml.Node, keys ...string) *yaml.Node {
	if k := lookupKey(n, keys...); k != nil {
		return k.value
	}
	return nil
}

// lookupKeyNode returns the key node of a dotted path ("llm.api_key").
func lookupKeyNode(n *yaml.Node, path string) *yaml.Node {
	if k := lookupKey(n, strings.Split(path, ".")...); k != nil {
		return k.key
	}
	return nil
}

type keyValue struct{ key, value *yaml.Node }

func lookupKey(n *yaml.Node, keys ...string) *keyValue {
	var found *keyValue
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		found = nil
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				found = &keyValue{n.Content[i], n.Content[i+1]}
				break
			}
		}
		if found == nil {
			return nil
		}
		n = found.value
	}
	return found
}

// Secrets returns every secret value that is set, and the password inside
// the Redis URL, longest first, without repeats: what to scrub from text
// that leaves the process (tool output shown to the model or a channel).
// Replace longer values first so that a secret that contains another is
// scrubbed whole.
func (c *Config) Secrets() []string {
	var out []string
	for _, s := range c.secretFields() {
		v := s.val.Reveal()
		if v == "" {
			continue
		}
		out = append(out, v)
		if s.val == &c.Store.RedisURL {
			// It may list several hosts and hold a sentinel_password,
			// which url.Parse does not tell apart.
			out = append(out, redisurl.Secrets(v)...)
			continue
		}
		if u, err := url.Parse(v); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				out = append(out, p)
			}
		}
	}
	out = append(out, c.mcpSecrets()...)
	// Validate refuses passwords in these URLs, but a Config that was not
	// validated must not leak them either.
	for _, s := range []string{c.LLM.BaseURL, c.Slack.APIURL, c.Telegram.APIURL} {
		if u, err := url.Parse(s); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b))
	})
	return slices.Compact(out)
}
