package redact

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"http://localhost:11434/v1", "http://localhost:11434/v1"},
		// Not re-encoded when there is nothing to mask.
		{"https://h/a%2Fb?q=a+b&format=json#top", "https://h/a%2Fb?q=a+b&format=json#top"},
		{"https://user:LEAK@llm.example/v1", "https://user:xxxxx@llm.example/v1"},
		{"https://:LEAK@llm.example/v1", "https://:xxxxx@llm.example/v1"},
		{"https://LEAK-token@github.com/o/r", "https://xxxxx@github.com/o/r"},
		{"https://user:p@ss@LEAK@host/v1", "https://user:xxxxx@host/v1"},
		{"https://user:LEAK%2F1@host/v1", "https://user:xxxxx@host/v1"},
		{"http://user:***@host/v1", "http://user:xxxxx@host/v1"}, // as net/http quotes it
		{"https://h/v1?key=LEAK", "https://h/v1?key=xxxxx"},
		{"https://h/v1?api_key=LEAK&x=1", "https://h/v1?api_key=xxxxx&x=1"},
		{"https://h/?apikey=LEAK", "https://h/?apikey=xxxxx"},
		{"https://h/?apiKey=LEAK", "https://h/?apiKey=xxxxx"},
		{"https://h/?api-key=LEAK", "https://h/?api-key=xxxxx"},
		{"https://h/?X-Api-Key=LEAK", "https://h/?X-Api-Key=xxxxx"},
		{"https://h/?token=LEAK", "https://h/?token=xxxxx"},
		{"https://h/?access_token=LEAK", "https://h/?access_token=xxxxx"},
		{"https://h/?accessToken=LEAK", "https://h/?accessToken=xxxxx"},
		{"https://h/?refresh_token=LEAK", "https://h/?refresh_token=xxxxx"},
		{"https://h/?auth=LEAK", "https://h/?auth=xxxxx"},
		{"https://h/?authorization=LEAK", "https://h/?authorization=xxxxx"},
		{"https://h/?password=LEAK", "https://h/?password=xxxxx"},
		{"https://h/?passwd=LEAK", "https://h/?passwd=xxxxx"},
		{"https://h/?pass=LEAK", "https://h/?pass=xxxxx"},
		{"https://h/?pwd=LEAK", "https://h/?pwd=xxxxx"},
		{"https://h/?secret=LEAK", "https://h/?secret=xxxxx"},
		{"https://h/?client_secret=LEAK", "https://h/?client_secret=xxxxx"},
		{"https://h/?sig=LEAK&se=2030", "https://h/?sig=xxxxx&se=2030"},
		{"https://h/?signature=LEAK", "https://h/?signature=xxxxx"},
		{"https://b.s3.example/o?X-Amz-Credential=LEAK&X-Amz-Signature=LEAK&X-Amz-Security-Token=LEAK",
			"https://b.s3.example/o?X-Amz-Credential=xxxxx&X-Amz-Signature=xxxxx&X-Amz-Security-Token=xxxxx"},
		{"https://h/?subscription_key=LEAK&bot_token=LEAK&app_secret=LEAK", "https://h/?subscription_key=xxxxx&bot_token=xxxxx&app_secret=xxxxx"},
		{"https://h/?jwt=LEAK", "https://h/?jwt=xxxxx"},
		{"https://h/?api_key[]=LEAK", "https://h/?api_key[]=xxxxx"},
		// Hostile forms.
		{"https://h/?KEY=LEAK&Token=LEAK", "https://h/?KEY=xxxxx&Token=xxxxx"},
		{"https://h/?key=LEAK-1&q=x&key=LEAK-2", "https://h/?key=xxxxx&q=x&key=xxxxx"},
		{"https://h/?%6Bey=LEAK", "https://h/?%6Bey=xxxxx"},
		{"https://h/?%6B%65%79=LEAK", "https://h/?%6B%65%79=xxxxx"},
		{"https://h/?api+key=LEAK", "https://h/?api+key=xxxxx"},
		{"https://h/?key%3DLEAK", "https://h/?key=xxxxx"},
		{"https://h/?a=1;key=LEAK", "https://h/?a=1;key=xxxxx"},
		{"https://h/?%zz=LEAK&q=1", "https://h/?xxxxx&q=1"},
		{"https://h/?key=", "https://h/?key=xxxxx"},
		{"https://h/cb#access_token=LEAK&state=s", "https://h/cb#access_token=xxxxx&state=s"},
		{"https://h/cb?code=1#id_token=LEAK", "https://h/cb?code=1#id_token=xxxxx"},
		{"https://u:LEAK@h/?key=LEAK#token=LEAK", "https://u:xxxxx@h/?key=xxxxx#token=xxxxx"},
		{"https://h/page#section-2", "https://h/page#section-2"},
		{"https://user:LEAK/x@host/v1", "[redacted]"},   // the '/' ends the host at "user:LEAK"
		{"https://user:123/LEAK@host/v1", "[redacted]"}, // the digits read as a port
		{"https://user:12?LEAK@host/v1", "[redacted]"},
		{"https://user:12#LEAK@host/v1", "[redacted]"},
		{"user:LEAK@host/v1", "[redacted]"}, // no "//": "user" reads as the scheme
		{"https://user:LEAK%zz@host", "[redacted]"},
		{"http://[::1/LEAK", "[redacted]"},
		{"https://\x7fLEAK", "[redacted]"},
		{"localhost:11434/v1", "localhost:11434/v1"},
		{"redis+sentinel://:LEAK@a,b/m?sentinel_password=LEAK", "redis+sentinel://:xxxxx@a,b/m?sentinel_password=xxxxx"},
	} {
		got := URL(tc.in)
		if got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "LEAK") {
			t.Errorf("URL(%q) = %q leaks", tc.in, got)
		}
	}
}

// TestURLKeepsHost: a redacted URL still says where it points.
func TestURLKeepsHost(t *testing.T) {
	got := URL("https://u:LEAK@search.example:8443/base?format=json&api_key=LEAK")
	if got != "https://u:xxxxx@search.example:8443/base?format=json&api_key=xxxxx" {
		t.Errorf("got %q", got)
	}
}

func TestSecretName(t *testing.T) {
	for _, n := range []string{"q", "format", "page", "lang", "se", "sp", "v", "api-version", "state", "code", "session", "user", "name", "keyword"} {
		if secretName(n) {
			t.Errorf("secretName(%q) = true", n)
		}
	}
}

// TestErrorFromNetHTTP checks the errors net/http really returns: a
// refused connection and a redirect to a dead address quote the URL.
func TestErrorFromNetHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+dead+"/next?sig=LEAK-sig", http.StatusFound)
	}))
	defer srv.Close()

	for name, target := range map[string]string{
		"refused":  "http://user:LEAK-pw@" + dead + "/v1/chat?key=LEAK-key&Token=LEAK-tok#access_token=LEAK-frag",
		"redirect": srv.URL + "/start?api_key=LEAK-key",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := http.Get(target)
			if err == nil {
				t.Fatal("no error")
			}
			for _, e := range []error{err, fmt.Errorf("calling the model: %w", err)} {
				r := Error(e)
				if strings.Contains(r.Error(), "LEAK") {
					t.Errorf("Error(%v) = %v", e, r)
				}
				if !strings.Contains(r.Error(), "127.0.0.1") || !strings.Contains(r.Error(), "xxxxx") {
					t.Errorf("Error(%v) = %v; the host and the mask should show", e, r)
				}
				var ue *url.Error
				if !errors.As(r, &ue) || strings.Contains(ue.URL, "LEAK") {
					t.Errorf("errors.As finds %v", ue)
				}
				var ne net.Error
				if !errors.As(r, &ne) {
					t.Errorf("%v is no longer a net.Error", r)
				}
			}
		})
	}
}

func TestErrorKeepsChain(t *testing.T) {
	base := &url.Error{Op: "Get", URL: "https://h/?key=LEAK", Err: context.DeadlineExceeded}
	wrapped := fmt.Errorf("fetch: %w", base)
	r := Error(wrapped)
	if r.Error() != `fetch: Get "https://h/?key=xxxxx": context deadline exceeded` {
		t.Errorf("got %q", r.Error())
	}
	if !errors.Is(r, context.DeadlineExceeded) {
		t.Error("errors.Is lost the cause")
	}
	if !errors.Is(r, base) {
		t.Error("errors.Is lost the original")
	}
	// Nothing to redact: the same error back.
	plain := errors.New("plain")
	if Error(plain) != plain || Error(nil) != nil {
		t.Error("Error changed an error without a URL")
	}
	clean := &url.Error{Op: "Get", URL: "https://h/", Err: plain}
	if Error(clean) != error(clean) {
		t.Error("Error changed a URL error without credentials")
	}
	// A wrapper that quotes the URL itself.
	custom := fmt.Errorf("GET https://h/?key=LEAK failed: %w", base)
	if got := Error(custom).Error(); strings.Contains(got, "LEAK") {
		t.Errorf("got %q", got)
	}
}

func FuzzURL(f *testing.F) {
	for _, s := range []string{"https://u:p@h/?key=v#token=t", "http://h:1/a@b", "x:y@z", "https://h/?%6Bey=v;a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := URL(raw)
		if got == Whole || got == raw {
			return
		}
		// Redacting twice changes nothing more.
		if again := URL(got); again != got {
			t.Errorf("URL(%q) = %q, URL of that = %q", raw, got, again)
		}
	})
}

// FuzzURLHidesSecrets builds well-formed URLs around fuzzed secrets, in
// the password, a secret parameter (under a fuzzed spelling of its name)
// and the fragment, and checks that none survives.
func FuzzURLHidesSecrets(f *testing.F) {
	f.Add("p@ss/w?rd#", "v&x=1", "Api_Key")
	f.Add("", "%", "TOKEN")
	f.Fuzz(func(t *testing.T, pw, val, name string) {
		const marker = "S3CR3T"
		if !secretName(name) {
			name = "key"
		}
		u := url.URL{Scheme: "https", User: url.UserPassword("u", marker+pw), Host: "h.example:8443", Path: "/v1",
			RawQuery: "q=1&" + url.QueryEscape(name) + "=" + url.QueryEscape(marker+val),
			Fragment: "access_token=" + marker + val}
		raw := u.String()
		got := URL(raw)
		if strings.Contains(got, marker) {
			t.Errorf("URL(%q) = %q", raw, got)
		}
		if !strings.Contains(got, "h.example:8443") {
			t.Errorf("URL(%q) = %q lost the host", raw, got)
		}
	})
}
