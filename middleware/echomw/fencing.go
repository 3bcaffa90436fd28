package echomw

import (
	"errors"

	"github.com/labstack/echo/v4"
	echomiddleware "github.com/labstack/echo/v4/middleware"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/middleware"
)

// FencingConfig configures the Fencing middleware.
type FencingConfig struct {
	// Skipper defines a function to skip the middleware.
	Skipper echomiddleware.Skipper

	// TokenLookup is where to find the fencing token: a comma-separated list
	// of "<source>:<name>" tried in order, source one of header, query,
	// param or cookie. Default "header:Fencing-Token".
	TokenLookup string

	// KeyLookup is where to find the lock key naming the fenced resource, in
	// the form of TokenLookup. Default "header:Lock-Key"; "param:id" fences
	// the resource named in the path.
	KeyLookup string

	// Store checks and records tokens. Required.
	Store driver.FenceStore

	// Methods are the methods checked. Default: every method but GET, HEAD,
	// OPTIONS and TRACE.
	Methods []string

	// Optional lets writes carrying neither key nor token through unchecked
	// instead of refusing them with 428.
	Optional bool

	// TokenVerificationKey, if set, makes the middleware accept only
	// tokens the lock side signed with this key (lockx.WithTokenSigning):
	// 428 without a Fencing-Token-Signature header, 403 for a signature
	// that does not match (middleware.WithTokenVerification).
	TokenVerificationKey []byte

	// ErrorHandler is called with the refusal, an *echo.HTTPError whose
	// Internal is a *middleware.Problem wrapping the cause (e.g. a
	// *lockx.StaleTokenError). Its result is returned by the middleware.
	// Default: return the error.
	ErrorHandler func(c echo.Context, err error) error
}

// DefaultFencingConfig is the default Fencing middleware config.
var DefaultFencingConfig = FencingConfig{
	Skipper:     echomiddleware.DefaultSkipper,
	TokenLookup: middleware.DefaultTokenLookup,
	KeyLookup:   middleware.DefaultKeyLookup,
}

// Fencing returns middleware that checks the fencing token of every write
// with store before the handler runs: 409 Conflict for a stale token (the
// body carries both tokens), 428 Precondition Required for a missing one,
// 400 for a malformed one, 503 if store cannot answer. The handler finds the
// accepted fence with FenceFromContext.
func Fencing(store driver.FenceStore) echo.MiddlewareFunc {
	c := DefaultFencingConfig
	c.Store = store
	return FencingWithConfig(c)
}

// FencingWithConfig returns Fencing middleware with config. It panics on a
// config without Store or with an invalid lookup.
func FencingWithConfig(config FencingConfig) echo.MiddlewareFunc {
	mw, err := config.ToMiddleware()
	if err != nil {
		panic(err)
	}
	return mw
}

// ToMiddleware converts config to middleware or returns an error for an
// invalid config.
func (config FencingConfig) ToMiddleware() (echo.MiddlewareFunc, error) {
	if config.Skipper == nil {
		config.Skipper = DefaultFencingConfig.Skipper
	}
	if config.TokenLookup == "" {
		config.TokenLookup = DefaultFencingConfig.TokenLookup
	}
	if config.KeyLookup == "" {
		config.KeyLookup = DefaultFencingConfig.KeyLookup
	}
	opts := []middleware.Option{middleware.WithTokenLookup(config.TokenLookup), middleware.WithKeyLookup(config.KeyLookup)}
	if config.Methods != nil {
		opts = append(opts, middleware.WithMethods(config.Methods...))
	}
	if config.Optional {
		opts = append(opts, middleware.Optional())
	}
	if config.TokenVerificationKey != nil {
		opts = append(opts, middleware.WithTokenVerification(config.TokenVerificationKey))
	}
	fc, err := middleware.NewFenceChecker(config.Store, opts...)
	if err != nil {
		return nil, errors.New("echo: fencing middleware: " + err.Error())
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if config.Skipper(c) {
				return next(c)
			}
			r := c.Request()
			f, ok, err := fc.Check(r, c.Param)
			if err != nil {
				return refuse(c, err, config.ErrorHandler)
			}
			if ok {
				c.SetRequest(r.WithContext(middleware.ContextWithFence(r.Context(), f)))
			}
			return next(c)
		}
	}, nil
}

// FenceFromContext returns the fence Fencing accepted for c's request.
func FenceFromContext(c echo.Context) (middleware.Fence, bool) {
	return middleware.FenceFromContext(c.Request().Context())
}

// HTTPError converts a *middleware.Problem to Echo's error: Code is the
// status, Message the problem itself (Echo's default error handler sends it
// as the JSON body, tokens included), Internal the problem, which wraps the
// cause. Other errors are returned unchanged.
func HTTPError(err error) error {
	var p *middleware.Problem
	if !errors.As(err, &p) {
		return err
	}
	return &echo.HTTPError{Code: p.Status, Message: p, Internal: p}
}

func refuse(c echo.Context, err error, handler func(echo.Context, error) error) error {
	var p *middleware.Problem
	if errors.As(err, &p) {
		p.SetHeaders(c.Response().Header())
	}
	herr := HTTPError(err)
	if handler != nil {
		return handler(c, herr)
	}
	return herr
}
