package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	goai "github.com/sashabaranov/go-openai"

	"github.com/firstmate/firstmate/agent"
	"github.com/firstmate/firstmate/internal/redact"
)

// record is what the HTTP layer saw during one attempt. go-openai keeps the
// response headers to itself on errors, so recordingDoer notes the status
// and Retry-After on the way through. The record travels in the request's
// context, which keeps concurrent calls apart.
type record struct {
	called        bool // a request reached the HTTP client
	status        int
	retryAfter    time.Duration
	hasRetryAfter bool
	tooLarge      error                  // the limit the body passed, if it did
	body          []byte                 // the request's body (body.go), sent for go-openai's; nil once sent
	encode        func() ([]byte, error) // the body again, should net/http send it twice
}

type recordKey struct{}

func withRecord(ctx context.Context, rec *record) context.Context {
	return context.WithValue(ctx, recordKey{}, rec)
}

// recordingDoer fills in the attempt's record, and puts every body
// go-openai reads under the limits for a reply of maxResponse bytes (see
// limit.go).
type recordingDoer struct {
	next        *http.Client
	maxResponse int
}

func (d recordingDoer) Do(req *http.Request) (*http.Response, error) {
	rec, _ := req.Context().Value(recordKey{}).(*record)
	sent := func() {}
	if rec != nil && rec.body != nil && req.Method == http.MethodPost {
		sent = setBody(req, rec.body, rec.encode)
		rec.body = nil
	}
	resp, err := d.next.Do(req)
	sent() // the reply has begun (or the call failed): no resend of the body
	// net/http quotes the URL in its errors, and the base URL (or a
	// redirect's target) may hold a password or a key: the error is logged.
	err = redact.Error(err)
	if rec != nil {
		rec.called = true
		if resp != nil {
			rec.status = resp.StatusCode
			rec.retryAfter, rec.hasRetryAfter = parseRetryAfter(resp.Header, time.Now())
		}
	}
	if resp != nil && resp.Body != nil {
		resp.Body = limitBody(req, resp, d.maxResponse, rec)
	}
	return resp, err
}

// parseRetryAfter reads Retry-After (seconds or an HTTP date), preferring
// the millisecond retry-after-ms that OpenAI also sends.
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	const most = 24 * time.Hour // keeps absurd values from overflowing
	clamp := func(f float64) time.Duration {
		if f > float64(most) {
			return most
		}
		return time.Duration(f)
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return clamp(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return clamp(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), most), true
	}
	return 0, false
}

// attemptError is one failed attempt with what the HTTP layer saw.
type attemptError struct {
	rec *record
	err error
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// retry runs op until it succeeds, fails for good or runs out of attempts.
// sent reports whether output already reached the person, after which a
// retry would repeat it.
func (m *Model) retry(ctx context.Context, sent func() bool, op func(ctx context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		var ae *attemptError
		if !errors.As(err, &ae) {
			return err // not a call failure: a bug in building the request
		}
		rec := ae.rec
		if sent() {
			return m.modelError(rec, attempt, fmt.Errorf("the answer broke off after it had started: %w", ae.err))
		}
		if !retryable(rec, ae.err) || attempt > m.cfg.MaxRetries {
			return m.modelError(rec, attempt, ae.err)
		}
		if rec.hasRetryAfter && m.cfg.OnRetryAfter != nil {
			m.cfg.OnRetryAfter(rec.retryAfter)
		}
		wait := backoff(m.cfg.RetryBase, attempt)
		if rec.hasRetryAfter {
			if rec.retryAfter > m.cfg.MaxRetryWait {
				return m.modelError(rec, attempt, fmt.Errorf("%w; the server asks to wait %v, longer than the %v allowed",
					ae.err, rec.retryAfter.Round(time.Second), m.cfg.MaxRetryWait))
			}
			wait = rec.retryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return m.modelError(rec, attempt, fmt.Errorf("%w; no time left to retry before the deadline", ae.err))
		}
		if err := m.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

func (m *Model) modelError(rec *record, attempts int, err error) *agent.ModelError {
	me := &agent.ModelError{Attempts: attempts, Err: err, Status: statusOf(rec, err)}
	if rec.hasRetryAfter {
		me.RetryAfter = rec.retryAfter
	}
	return me
}

// statusOf is the HTTP status of a failed attempt, 0 when the failure was
// not an HTTP error (network, broken stream, timeout).
func statusOf(rec *record, err error) int {
	if rec.status >= 400 {
		return rec.status
	}
	var apiErr *goai.APIError
	if errors.As(err, &apiErr) && apiErr.HTTPStatusCode >= 400 {
		return apiErr.HTTPStatusCode
	}
	var reqErr *goai.RequestError
	if errors.As(err, &reqErr) && reqErr.HTTPStatusCode >= 400 {
		return reqErr.HTTPStatusCode
	}
	return 0
}

// retryable says whether another attempt may succeed: rate limits, server
// errors, timeouts and network failures may pass; a request the server
// rejected (400, 401, 404 …) will be rejected again.
//
// A response that passed its size limit is not retried either: it comes
// from a server or a model caught in a loop on this request, which another
// attempt would most likely repeat, at the cost of the whole limit (paid
// tokens, and time) each time. A stall is retried like a timeout.
func retryable(rec *record, err error) bool {
	if !rec.called {
		return false // go-openai refused the request before sending it
	}
	if errors.Is(err, ErrTooLarge) {
		return false
	}
	switch s := statusOf(rec, err); {
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests, s >= 500:
		return true
	case s >= 400:
		return false
	}
	return true
}

// backoff is exponential with full jitter: a random wait up to base·2ⁿ⁻¹,
// capped, so that many clients refused at once do not return at once.
func backoff(base time.Duration, attempt int) time.Duration {
	ceil := base
	for i := 1; i < attempt && ceil < maxBackoff; i++ {
		ceil *= 2 // stops long before it could overflow
	}
	ceil = min(ceil, maxBackoff)
	if ceil <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// callError is a failure described for people, keeping the original error
// for errors.As (e.g. *openai.APIError).
type callError struct {
	msg string
	err error
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.err }

// describe turns go-openai's errors ("error, status code: 429, status: 429
// Too Many Requests, message: …") into a short message; the status itself
// is shown by agent.ModelError.
func describe(err error, rec *record, timeout time.Duration) error {
	var (
		apiErr *goai.APIError
		reqErr *goai.RequestError
		msg    string
	)
	switch {
	case errors.Is(err, errIdle):
		msg = fmt.Sprintf("the server sent nothing for %v", timeout)
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode == 0:
		msg = "the server reported an error in the stream: " + apiErr.Message
	case errors.As(err, &apiErr):
		msg = apiErr.Message
	case errors.As(err, &reqErr):
		msg = strings.TrimSpace(string(reqErr.Body))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "the connection closed in the middle of the answer"
	default:
		return err
	}
	status := statusOf(rec, err)
	if msg == "" {
		msg = http.StatusText(status)
	}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		msg += " (check the API key)"
	case http.StatusNotFound:
		msg += " (check the base URL, which usually ends in /v1, and the model name)"
	}
	return &callError{msg: msg, err: err}
}
