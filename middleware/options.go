package middleware

import (
	"net/http"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// Defaults of the middleware.
const (
	// DefaultKeyLookup finds the lock key (the fenced resource) of a request.
	DefaultKeyLookup = "header:Lock-Key"
	// DefaultTokenLookup finds the fencing token of a request.
	DefaultTokenLookup = "header:Fencing-Token"
	// DefaultSerializeWait is how long Serialize waits for a busy resource.
	DefaultSerializeWait = 2 * time.Second
	// DefaultRetryAfter is the Retry-After sent with 423 Locked.
	DefaultRetryAfter = time.Second
)

// Header names the client Transport stamps and the default lookups read.
const (
	HeaderLockKey      = "Lock-Key"
	HeaderFencingToken = "Fencing-Token"
	// HeaderTokenSignature carries the lock side's signature of the token
	// (lockx.WithTokenSigning), checked by WithTokenVerification.
	HeaderTokenSignature = "Fencing-Token-Signature"
)

// Skipper reports whether a request bypasses a middleware.
type Skipper func(r *http.Request) bool

// ErrorHandler answers a request the middleware refused. err is always a
// *Problem; the default handler is (*Problem).ServeHTTP.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

// Option configures Fencing or Serialize. Options that do not concern a
// middleware are ignored by it.
type Option func(*config)

type config struct {
	skipper      Skipper
	errorHandler ErrorHandler
	methods      []string // nil: the middleware's default
	keyLookup    string
	tokenLookup  string
	optional     bool
	wait         time.Duration
	lockOpts     []lockx.Option
	retryAfter   time.Duration
	verifyKey    []byte // WithTokenVerification
}

func newConfig(opts []Option) config {
	c := config{
		keyLookup:   DefaultKeyLookup,
		tokenLookup: DefaultTokenLookup,
		wait:        DefaultSerializeWait,
		retryAfter:  DefaultRetryAfter,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.errorHandler == nil {
		c.errorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
			err.(*Problem).ServeHTTP(w, r)
		}
	}
	return c
}

// WithSkipper lets requests for which skip returns true bypass the
// middleware.
func WithSkipper(skip Skipper) Option { return func(c *config) { c.skipper = skip } }

// WithErrorHandler replaces the default problem+json response.
func WithErrorHandler(h ErrorHandler) Option { return func(c *config) { c.errorHandler = h } }

// WithMethods sets the methods the middleware applies to; other methods pass
// through. Fencing defaults to the unsafe methods POST, PUT, PATCH and
// DELETE (and any method not known to be safe); Serialize to every method.
func WithMethods(methods ...string) Option {
	return func(c *config) { c.methods = append([]string{}, methods...) }
}

// WithKeyLookup sets where Fencing finds the lock key that names the fenced
// resource, as a comma-separated list of source:name tried in order —
// header:, query:, param: (a path parameter) or cookie:. The default is
// "header:Lock-Key". Use "param:id" to fence the resource named in the path;
// then the client sends only the token.
func WithKeyLookup(lookup string) Option { return func(c *config) { c.keyLookup = lookup } }

// WithTokenLookup sets where Fencing finds the fencing token, in the form of
// WithKeyLookup. The default is "header:Fencing-Token".
func WithTokenLookup(lookup string) Option { return func(c *config) { c.tokenLookup = lookup } }

// Optional lets write requests that carry neither a key nor a token through
// unchecked (Fencing); the default answers them 428 Precondition Required.
// Use it while clients migrate; a request with only one of the two is still
// refused.
func Optional() Option { return func(c *config) { c.optional = true } }

// WithTokenVerification makes Fencing accept only tokens signed with key
// by the lock side (lockx.WithTokenSigning, or lockxd's signing key): the
// signature travels in the Fencing-Token-Signature header and covers the
// lock key and the token. A write without it is answered 428
// (signed-fencing-token-required), one with a signature that does not
// match 403 (forged-fencing-token), before the store records anything, so
// a caller without the key cannot raise the fence. NewFenceChecker and
// Fencing report a key shorter than lockx.MinSigningKeyLen as an error.
// Without this option, unsigned tokens are accepted as before.
func WithTokenVerification(key []byte) Option {
	return func(c *config) { c.verifyKey = append([]byte{}, key...) }
}

// WithWait sets how long Serialize waits for a busy resource before it
// answers 423 Locked (default DefaultSerializeWait). Zero does not wait.
func WithWait(d time.Duration) Option { return func(c *config) { c.wait = d } }

// WithLockOptions passes options (lease, fairness, …) to every acquisition
// Serialize makes. WithWait sets the wait budget.
func WithLockOptions(opts ...lockx.Option) Option {
	return func(c *config) { c.lockOpts = append(c.lockOpts, opts...) }
}

// WithRetryAfter sets the Retry-After Serialize sends with 423 Locked
// (default DefaultRetryAfter).
func WithRetryAfter(d time.Duration) Option { return func(c *config) { c.retryAfter = d } }

// unsafe reports whether method may change state (RFC 9110 §9.2.1): every
// method except the safe ones.
func unsafe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

func methodSet(methods []string) map[string]bool {
	if methods == nil {
		return nil
	}
	m := make(map[string]bool, len(methods))
	for _, s := range methods {
		m[s] = true
	}
	return m
}
