package echomw_test

import (
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/middleware/echomw"
	"github.com/lockx-go/lockx/patterns/idempotency"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
)

func echoServer(t *testing.T, guard lockx.Idempotency, app http.Handler) http.Handler {
	e := echo.New()
	e.Use(echomw.IdempotencyWithConfig(echomw.IdempotencyConfig{
		Guard:            guard,
		MaxBodyBytes:     idemtest.MaxBodyBytes,
		MaxResponseBytes: idemtest.MaxResponseBytes,
		Principal:        func(c echo.Context) (string, error) { return c.Request().Header.Get(idemtest.PrincipalHeader), nil },
	}))
	e.Any("/*", echo.WrapHandler(app))
	return e
}

func memGuards(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard {
	b := memlock.New()
	gs := make([]*idempotency.Guard, n)
	for i := range gs {
		locks := lockx.New(b)
		t.Cleanup(func() { locks.Close() })
		g, err := idempotency.New(locks, opts...)
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	return gs
}

// redisGuards returns n guards over n backends sharing the machine's Redis
// under a fresh prefix: n service instances.
func redisGuards(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	prefix := redislock.WithPrefix("lockxtest:echoidem:" + rand.Text() + ":")
	gs := make([]*idempotency.Guard, n)
	for i := range gs {
		locks := lockx.New(redislock.New(rdb, prefix))
		t.Cleanup(func() { locks.Close() })
		g, err := idempotency.New(locks, opts...)
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	return gs
}

func TestIdempotency(t *testing.T)      { idemtest.RunHTTP(t, echoServer, memGuards) }
func TestIdempotencyRedis(t *testing.T) { idemtest.RunHTTP(t, echoServer, redisGuards) }

// TestIdempotencyHandlerError: an error returned by an Echo handler is
// rendered inside the middleware, so the error response is stored and
// replayed like any other.
func TestIdempotencyHandlerError(t *testing.T) {
	g := memGuards(t, 1)[0]
	e := echo.New()
	runs := 0
	e.POST("/pay", func(c echo.Context) error {
		runs++
		return echo.NewHTTPError(http.StatusPaymentRequired, "card declined")
	}, echomw.Idempotency(g))
	var bodies []string
	for range 2 {
		req := httptest.NewRequest("POST", "/pay", nil)
		req.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		if w.Code != http.StatusPaymentRequired {
			t.Fatalf("got %d %s", w.Code, w.Body)
		}
		bodies = append(bodies, w.Body.String()+w.Header().Get("Idempotent-Replayed"))
	}
	if runs != 1 || bodies[1] != bodies[0][:len(bodies[0])]+"true" {
		t.Fatalf("runs=%d bodies=%q; want one run and a replay", runs, bodies)
	}
}

func TestIdempotencyErrorHandlerAndSkipper(t *testing.T) {
	g := memGuards(t, 1)[0]
	e := echo.New()
	var got error
	e.POST("/x", func(c echo.Context) error { return c.String(http.StatusTeapot, "tea") }, echomw.IdempotencyWithConfig(echomw.IdempotencyConfig{
		Guard:        g,
		Skipper:      func(c echo.Context) bool { return c.QueryParam("skip") == "1" },
		ErrorHandler: func(c echo.Context, err error) error { got = err; return c.NoContent(http.StatusBadRequest) },
	}))
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("POST", "/x", nil))
	he, ok := got.(*echo.HTTPError)
	if w.Code != http.StatusBadRequest || !ok || he.Code != http.StatusBadRequest || he.Internal == nil {
		t.Fatalf("got %d, handler saw %#v", w.Code, got)
	}
	w = httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("POST", "/x?skip=1", nil))
	if w.Code != http.StatusTeapot {
		t.Fatalf("skipped: got %d", w.Code)
	}
	if _, err := (echomw.IdempotencyConfig{}).ToMiddleware(); err == nil {
		t.Fatal("config without a guard accepted")
	}
}
