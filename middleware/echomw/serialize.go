package echomw

import (
	"errors"
	"time"

	"github.com/labstack/echo/v4"
	echomiddleware "github.com/labstack/echo/v4/middleware"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/middleware"
)

// SerializeConfig configures the Serialize middleware.
type SerializeConfig struct {
	// Skipper defines a function to skip the middleware.
	Skipper echomiddleware.Skipper

	// Locks hands out the locks. Required.
	Locks *lockx.Client

	// KeyFunc derives the lock key of a request (a path parameter, a
	// header, a body field). An empty key with a nil error runs the handler
	// without a lock; an error is answered 400. Required.
	KeyFunc func(c echo.Context) (string, error)

	// Methods are the methods serialized. Default: every method.
	Methods []string

	// Wait is how long to wait for a busy resource before answering
	// 423 Locked. Default middleware.DefaultSerializeWait; negative means
	// do not wait.
	Wait time.Duration

	// LockOptions are passed to every acquisition (lease, fairness, …).
	LockOptions []lockx.Option

	// RetryAfter is sent with 423 Locked. Default
	// middleware.DefaultRetryAfter.
	RetryAfter time.Duration

	// ErrorHandler is called with a refusal, an *echo.HTTPError whose
	// Internal is a *middleware.Problem. Default: return the error.
	ErrorHandler func(c echo.Context, err error) error
}

// DefaultSerializeConfig is the default Serialize middleware config.
var DefaultSerializeConfig = SerializeConfig{
	Skipper:    echomiddleware.DefaultSkipper,
	Wait:       middleware.DefaultSerializeWait,
	RetryAfter: middleware.DefaultRetryAfter,
}

// ParamKey returns a KeyFunc locking prefix + the path parameter name.
func ParamKey(prefix, name string) func(c echo.Context) (string, error) {
	return func(c echo.Context) (string, error) {
		if v := c.Param(name); v != "" {
			return prefix + v, nil
		}
		return "", nil
	}
}

// Serialize returns middleware that runs the requests of one key one at a
// time across every process sharing locks' backend: it waits up to the wait
// budget, answers 423 Locked with Retry-After if the resource stays busy,
// runs the handler under a context that carries the lock and is cancelled if
// the lock is lost, and releases the lock afterwards.
func Serialize(locks *lockx.Client, key func(c echo.Context) (string, error)) echo.MiddlewareFunc {
	c := DefaultSerializeConfig
	c.Locks, c.KeyFunc = locks, key
	return SerializeWithConfig(c)
}

// SerializeWithConfig returns Serialize middleware with config. It panics on
// a config without Locks or KeyFunc.
func SerializeWithConfig(config SerializeConfig) echo.MiddlewareFunc {
	mw, err := config.ToMiddleware()
	if err != nil {
		panic(err)
	}
	return mw
}

// ToMiddleware converts config to middleware or returns an error for an
// invalid config.
func (config SerializeConfig) ToMiddleware() (echo.MiddlewareFunc, error) {
	if config.Skipper == nil {
		config.Skipper = DefaultSerializeConfig.Skipper
	}
	if config.Wait == 0 {
		config.Wait = DefaultSerializeConfig.Wait
	} else if config.Wait < 0 {
		config.Wait = 0
	}
	if config.RetryAfter == 0 {
		config.RetryAfter = DefaultSerializeConfig.RetryAfter
	}
	if config.KeyFunc == nil {
		return nil, errors.New("echo: serialize middleware requires a KeyFunc")
	}
	opts := []middleware.Option{
		middleware.WithWait(config.Wait),
		middleware.WithRetryAfter(config.RetryAfter),
		middleware.WithLockOptions(config.LockOptions...),
	}
	if config.Methods != nil {
		opts = append(opts, middleware.WithMethods(config.Methods...))
	}
	s, err := middleware.NewSerializer(config.Locks, opts...)
	if err != nil {
		return nil, errors.New("echo: serialize middleware: " + err.Error())
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if config.Skipper(c) {
				return next(c)
			}
			key, err := config.KeyFunc(c)
			if err != nil {
				return refuse(c, middleware.KeyProblem(err), config.ErrorHandler)
			}
			r := c.Request()
			ctx, done, err := s.Enter(r.Context(), r.Method, key)
			if err != nil {
				return refuse(c, err, config.ErrorHandler)
			}
			defer done()
			c.SetRequest(r.WithContext(ctx))
			return next(c)
		}
	}, nil
}
