package echomw

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	echomiddleware "github.com/labstack/echo/v4/middleware"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/middleware"
)

// IdempotencyConfig configures the Idempotency middleware. The fields are
// those of middleware.IdempotencyConfig, with Echo's Skipper, Principal and
// Fingerprint on echo.Context and Echo's ErrorHandler.
type IdempotencyConfig struct {
	// Skipper defines a function to skip the middleware.
	Skipper echomiddleware.Skipper

	// Guard runs each request at most once per key and keeps its response
	// (an *idempotency.Guard). Required.
	Guard lockx.Idempotency

	// Methods the header applies to. Default POST and PATCH.
	Methods []string

	// Optional lets requests without the header through unprotected
	// instead of answering 400.
	Optional bool

	// AcceptUnquoted also accepts a bare key besides the draft's sf-string.
	AcceptUnquoted bool

	// Key limits; see middleware.IdempotencyConfig. Zero means the
	// default.
	MinKeyLength  int
	MaxKeyLength  int
	MinKeyEntropy float64
	KeyChars      string

	// Principal names the caller a record belongs to (user, tenant, API
	// key), so that no caller can replay another's response; an error
	// answers 401. Default: a digest of the Authorization header.
	Principal func(c echo.Context) (string, error)

	// Fingerprint identifies the request a key was first used for; a key
	// reused with another fingerprint answers 422. Default: method, path
	// and query, body digest.
	Fingerprint func(c echo.Context, body []byte) []byte

	// MaxBodyBytes bounds the request body (413 beyond). Default 1 MiB.
	MaxBodyBytes int64

	// MaxResponseBytes bounds a stored response; a larger one is passed
	// through and not stored. Default 1 MiB.
	MaxResponseBytes int

	// ReplayHeaders are the response headers stored and replayed.
	ReplayHeaders []string

	// Retryable reports statuses that are not stored. Default 408, 425,
	// 429, 502, 503, 504.
	Retryable func(status int) bool

	// RetryAfter is sent with 409 and 503. Default 1 s.
	RetryAfter time.Duration

	// ErrorHandler is called with the refusal, an *echo.HTTPError whose
	// Message and Internal are the *middleware.Problem (Echo's default
	// error handler sends it as application/problem+json). Its result is
	// returned by the middleware. Default: return the error.
	ErrorHandler func(c echo.Context, err error) error
}

// DefaultIdempotencyConfig is the default Idempotency middleware config.
var DefaultIdempotencyConfig = IdempotencyConfig{
	Skipper: echomiddleware.DefaultSkipper,
}

// Idempotency returns middleware implementing the Idempotency-Key header
// of the IETF draft over guard: the first request with a key runs the
// handler, retries get its stored response with Idempotent-Replayed: true,
// a retry while the first runs gets 409 with Retry-After, a key reused for
// another request 422, a missing or malformed key 400.
//
//	guard, _ := idempotency.New(locks)
//	e.POST("/payments", pay, echomw.Idempotency(guard))
func Idempotency(guard lockx.Idempotency) echo.MiddlewareFunc {
	c := DefaultIdempotencyConfig
	c.Guard = guard
	return IdempotencyWithConfig(c)
}

// IdempotencyWithConfig returns Idempotency middleware with config. It
// panics on a config without Guard.
func IdempotencyWithConfig(config IdempotencyConfig) echo.MiddlewareFunc {
	mw, err := config.ToMiddleware()
	if err != nil {
		panic(err)
	}
	return mw
}

type echoCtxKey struct{}

func echoContext(r *http.Request) echo.Context {
	c, _ := r.Context().Value(echoCtxKey{}).(echo.Context)
	return c
}

// ToMiddleware converts config to middleware or returns an error for an
// invalid config. The protocol is middleware.Replayer's; this adapts it.
func (config IdempotencyConfig) ToMiddleware() (echo.MiddlewareFunc, error) {
	if config.Skipper == nil {
		config.Skipper = DefaultIdempotencyConfig.Skipper
	}
	cfg := middleware.IdempotencyConfig{
		Guard:            config.Guard,
		Methods:          config.Methods,
		Optional:         config.Optional,
		AcceptUnquoted:   config.AcceptUnquoted,
		MinKeyLength:     config.MinKeyLength,
		MaxKeyLength:     config.MaxKeyLength,
		MinKeyEntropy:    config.MinKeyEntropy,
		KeyChars:         config.KeyChars,
		MaxBodyBytes:     config.MaxBodyBytes,
		MaxResponseBytes: config.MaxResponseBytes,
		ReplayHeaders:    config.ReplayHeaders,
		Retryable:        config.Retryable,
		RetryAfter:       config.RetryAfter,
	}
	needCtx := config.Principal != nil || config.Fingerprint != nil
	if p := config.Principal; p != nil {
		cfg.Principal = func(r *http.Request) (string, error) { return p(echoContext(r)) }
	}
	if f := config.Fingerprint; f != nil {
		cfg.Fingerprint = func(r *http.Request, body []byte) []byte { return f(echoContext(r), body) }
	}
	rp, err := middleware.NewReplayer(cfg)
	if err != nil {
		return nil, errors.New("echo: idempotency middleware: " + err.Error())
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if config.Skipper(c) {
				return next(c)
			}
			r := c.Request()
			if needCtx {
				r = r.WithContext(context.WithValue(r.Context(), echoCtxKey{}, c))
			}
			orig := c.Response()
			err := rp.Serve(orig, r, func(w http.ResponseWriter, r *http.Request) {
				// The handler writes through the Replayer's recorder, which
				// writes through orig, so Echo sees the status and size. An
				// error is rendered here, inside the recorder, so that the
				// error response is what gets stored and replayed.
				c.SetRequest(r)
				c.SetResponse(echo.NewResponse(w, c.Echo()))
				defer c.SetResponse(orig)
				if err := next(c); err != nil {
					c.Error(err)
				}
			})
			if err == nil {
				return nil
			}
			var p *middleware.Problem
			if !errors.As(err, &p) {
				return err
			}
			h := orig.Header()
			h.Set(echo.HeaderContentType, "application/problem+json")
			h.Set("Cache-Control", "no-store")
			if p.RetryAfter > 0 {
				h.Set("Retry-After", strconv.FormatInt(int64((p.RetryAfter+time.Second-1)/time.Second), 10))
			}
			herr := &echo.HTTPError{Code: p.Status, Message: p, Internal: p}
			if config.ErrorHandler != nil {
				return config.ErrorHandler(c, herr)
			}
			return herr
		}
	}, nil
}
