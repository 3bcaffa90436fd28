package httplock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// Option configures a Backend.
type Option func(*config)

type config struct {
	hc      *http.Client
	timeout time.Duration
	err     error
}

// WithHTTPClient makes the Backend send its requests with hc instead of its
// own client. Close then leaves hc alone. Give hc's transport room for one
// connection per concurrent call plus one per waiter (watch streams are
// long-lived requests): http.Transport's default of 2 idle connections per
// host makes a busy client open and close connections all the time.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) {
		if hc == nil {
			c.fail("http client", "nil")
			return
		}
		c.hc = hc
	}
}

// WithTimeout bounds each call whose context has no deadline (default
// DefaultTimeout). A non-positive d is an *driver.ArgError at every call.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("timeout", "must be positive")
			return
		}
		c.timeout = d
	}
}

func (c *config) fail(arg, reason string) {
	if c.err == nil {
		c.err = &driver.ArgError{Arg: "httplock " + arg, Reason: reason}
	}
}

// Backend is a driver.Backend served by lockxd over HTTP. It implements
// driver.Notifier (server-sent events), driver.BatchExtender,
// driver.ManyAcquirer,
// driver.RWBackend, driver.SemaphoreBackend, driver.FenceStore and
// driver.Inspector; whether a call of a capability succeeds depends on the
// backend lockxd runs over (a missing one answers 501, reported as an
// *Error matching driver.ErrUnavailable).
type Backend struct {
	base    string // endpoint without a trailing slash
	auth    string // Authorization header value
	hc      *http.Client
	own     *http.Transport // our transport, closed by Close
	timeout time.Duration
	err     error
	noWatch atomic.Bool // the server answered 501 to a watch

	ctx    context.Context // ends watch streams at Close
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // watch stream readers; Add under mu, before closed
}

// New returns a Backend that talks to the lockxd at endpoint (e.g.
// "http://127.0.0.1:7420") with apiKey, sent as a bearer token. Every key the
// Backend names lives in apiKey's tenant namespace on the server. An
// invalid endpoint or option is reported as an *driver.ArgError by every
// call.
func New(endpoint, apiKey string, opts ...Option) *Backend {
	cfg := config{timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		cfg.fail("endpoint", err.Error())
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		cfg.fail("endpoint", "want http:// or https:// and a host")
	case u.RawQuery != "" || u.Fragment != "":
		cfg.fail("endpoint", "must not have a query or fragment")
	}
	if apiKey == "" {
		cfg.fail("api key", "empty")
	}
	b := &Backend{base: strings.TrimSuffix(endpoint, "/"), auth: "Bearer " + apiKey, hc: cfg.hc, timeout: cfg.timeout, err: cfg.err}
	if b.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 0 // no global cap; per host below
		tr.MaxIdleConnsPerHost = 256
		b.own = tr
		b.hc = &http.Client{Transport: tr}
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b
}

// Close ends the Backend's watch streams and, if it made its own HTTP
// client, closes its idle connections. Locks stay with the server under
// their leases: release them first (lockx.Client.Close does).
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
	if b.own != nil {
		b.own.CloseIdleConnections()
	}
	return nil
}

// Error is a response of lockxd that is no verdict of the lock API: bad
// credentials (401), a quota or rate limit (429), a missing capability
// (501), an unreachable backend (503). The Backend returns it wrapped in an
// error matching driver.ErrUnavailable, as the driver.Backend contract asks;
// find it with errors.As.
type Error struct {
	Status     int           // HTTP status
	Code       string        // the problem's code, e.g. "quota" or "unauthorized"
	Detail     string        // the problem's detail
	RetryAfter time.Duration // from the Retry-After header, if any
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("lockxd: %d %s", e.Status, e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// call sends a JSON request to path and decodes a 200 answer into out (if
// not nil). Any other answer is returned as its problem with the status.
func (b *Backend) call(ctx context.Context, op, method, path string, in, out any) (status int, p wire.Problem, err error) {
	if b.err != nil {
		return 0, p, b.err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.timeout)
		defer cancel()
	}
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return 0, p, &driver.ArgError{Arg: "request", Reason: err.Error()}
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, body)
	if err != nil {
		return 0, p, driver.Unavailable(op, err)
	}
	req.Header.Set("Authorization", b.auth)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := b.hc.Do(req)
	if err != nil {
		return 0, p, driver.Unavailable(op, err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		if out != nil {
			if err := json.NewDecoder(res.Body).Decode(out); err != nil {
				return res.StatusCode, p, driver.Unavailable(op, fmt.Errorf("lockxd: bad response: %w", err))
			}
		}
		_, _ = io.Copy(io.Discard, res.Body) // let the connection be reused
		return res.StatusCode, p, nil
	}
	p = readProblem(res)
	return res.StatusCode, p, b.verdict(op, res, p)
}

// readProblem decodes an error answer's problem document; a body that is
// none gets a code made of the status text.
func readProblem(res *http.Response) wire.Problem {
	var p wire.Problem
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	_ = json.Unmarshal(raw, &p)
	if p.Code == "" {
		p.Code = strings.ToLower(strings.ReplaceAll(http.StatusText(res.StatusCode), " ", "-"))
	}
	return p
}

// verdict maps a non-200 answer to the lockx error it stands for. Refusals
// (409 not-acquired) come back as nil: callers read them from the status.
func (b *Backend) verdict(op string, res *http.Response, p wire.Problem) error {
	switch {
	case res.StatusCode == http.StatusConflict && p.Code == "not-acquired":
		return nil
	case res.StatusCode == http.StatusConflict && p.Code == "stale-token":
		return nil // the caller builds the *driver.StaleTokenError
	case res.StatusCode == http.StatusNotFound && p.Code == "not-held":
		return driver.ErrNotHeld
	case res.StatusCode == http.StatusConflict && p.Code == "upgrade":
		return driver.ErrUpgrade
	case res.StatusCode == http.StatusBadRequest:
		return &driver.ArgError{Arg: "request", Reason: "lockxd: " + p.Detail}
	case p.Code == "signature-required" || p.Code == "forged-token":
		return fmt.Errorf("lockx/httplock: %s: %s: %w", op, p.Detail, lockx.ErrBadSignature)
	}
	e := &Error{Status: res.StatusCode, Code: p.Code, Detail: p.Detail}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return driver.Unavailable(op, e)
}

// ms converts a duration to whole milliseconds for the wire, rounding up so
// that a positive duration never becomes zero.
func ms(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func fromMS(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

func checkLease(lease time.Duration) error {
	if lease <= 0 {
		return &driver.ArgError{Arg: "lease", Reason: "must be positive"}
	}
	return nil
}

var errNoToken = errors.New("lockxd: grant without a valid token")
