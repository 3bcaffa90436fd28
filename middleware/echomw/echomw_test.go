package echomw_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
	"github.com/lockx-go/lockx/middleware/echomw"
	"github.com/lockx-go/lockx/middleware/internal/fencetest"
)

// docsServer is the Echo twin of the net/http scenario server.
func docsServer(store driver.FenceStore, docs *fencetest.Docs) http.Handler {
	e := echo.New()
	e.PUT("/docs/:id", func(c echo.Context) error {
		f, _ := echomw.FenceFromContext(c)
		if f.Resource != "docs/"+c.Param("id") {
			return echo.NewHTTPError(http.StatusBadRequest, "fenced the wrong resource")
		}
		body, _ := io.ReadAll(c.Request().Body)
		docs.Put(c.Param("id"), string(body))
		return c.NoContent(http.StatusNoContent)
	}, echomw.Fencing(store))
	return e
}

func TestKleppmann(t *testing.T) {
	fencetest.Kleppmann(t, docsServer, stores(t))
}

func serve(h http.Handler, method, target string, kv ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestFencingAnswers(t *testing.T) {
	store := memlock.NewFenceStore()
	_ = store.Fence(context.Background(), "r", 10)
	e := echo.New()
	ok := func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }
	e.Any("/x", ok, echomw.Fencing(store))
	for _, tc := range []struct {
		method string
		kv     []string
		status int
	}{
		{"GET", nil, 204},
		{"PUT", []string{"Lock-Key", "r", "Fencing-Token", "10"}, 204},
		{"PUT", []string{"Lock-Key", "r", "Fencing-Token", "9"}, 409},
		{"PUT", nil, 428},
		{"PUT", []string{"Lock-Key", "r", "Fencing-Token", "x"}, 400},
	} {
		rec := serve(e, tc.method, "/x", tc.kv...)
		if rec.Code != tc.status {
			t.Fatalf("%s %v: %d, want %d: %s", tc.method, tc.kv, rec.Code, tc.status, rec.Body)
		}
		if tc.status == 409 {
			var p middleware.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Token != 9 || p.Seen != 10 || p.Resource != "r" {
				t.Fatalf("409 body %s: %+v %v", rec.Body, p, err)
			}
			if rec.Header().Get("Cache-Control") != "no-store" {
				t.Error("409 without Cache-Control: no-store")
			}
		}
	}
}

func TestFencingWithConfig(t *testing.T) {
	store := memlock.NewFenceStore()
	var got error
	e := echo.New()
	e.POST("/acct/:id", func(c echo.Context) error {
		f, _ := echomw.FenceFromContext(c)
		return c.String(http.StatusOK, f.Resource+"@"+f.Token.String())
	}, echomw.FencingWithConfig(echomw.FencingConfig{
		Store:       store,
		KeyLookup:   "param:id",
		TokenLookup: "query:fence",
		Skipper:     func(c echo.Context) bool { return c.Request().Header.Get("X-Skip") != "" },
		ErrorHandler: func(c echo.Context, err error) error {
			got = err
			return err
		},
	}))
	if rec := serve(e, "POST", "/acct/7?fence=5"); rec.Code != 200 || rec.Body.String() != "7@5" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if rec := serve(e, "POST", "/acct/7", "X-Skip", "1"); rec.Code != 200 || rec.Body.String() != "@0" {
		t.Fatalf("skipped: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(e, "POST", "/acct/7?fence=4"); rec.Code != 409 {
		t.Fatalf("stale: %d %s", rec.Code, rec.Body)
	}
	var he *echo.HTTPError
	var se *lockx.StaleTokenError
	var p *middleware.Problem
	if !errors.As(got, &he) || he.Code != 409 || he.Internal == nil || !errors.As(got, &se) || !errors.As(got, &p) || se.Seen != 5 {
		t.Fatalf("ErrorHandler got %#v", got)
	}
	if !errors.Is(got, lockx.ErrStaleToken) {
		t.Fatal("error does not match lockx.ErrStaleToken")
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := (echomw.FencingConfig{}).ToMiddleware(); err == nil {
		t.Error("FencingConfig without Store accepted")
	}
	if _, err := (echomw.FencingConfig{Store: memlock.NewFenceStore(), TokenLookup: "form:x"}).ToMiddleware(); err == nil {
		t.Error("FencingConfig with a bad lookup accepted")
	}
	if _, err := (echomw.SerializeConfig{KeyFunc: echomw.ParamKey("", "id")}).ToMiddleware(); err == nil {
		t.Error("SerializeConfig without Locks accepted")
	}
	locks := lockx.New(memlock.New())
	defer locks.Close()
	if _, err := (echomw.SerializeConfig{Locks: locks}).ToMiddleware(); err == nil {
		t.Error("SerializeConfig without KeyFunc accepted")
	}
	defer func() {
		if recover() == nil {
			t.Error("Fencing(nil) did not panic")
		}
	}()
	echomw.Fencing(nil)
}

func TestSerialize(t *testing.T) {
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	e := echo.New()
	e.POST("/acct/:id", func(c echo.Context) error {
		l, _ := lockx.LockFromContext(c.Request().Context())
		return c.String(http.StatusOK, l.Key())
	}, echomw.SerializeWithConfig(echomw.SerializeConfig{
		Locks:      locks,
		KeyFunc:    echomw.ParamKey("acct:", "id"),
		Wait:       20 * time.Millisecond,
		RetryAfter: 2 * time.Second,
	}))
	if rec := serve(e, "POST", "/acct/1"); rec.Code != 200 || rec.Body.String() != "acct:1" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	held, err := locks.Acquire(ctx, "acct:1")
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(e, "POST", "/acct/1")
	if rec.Code != http.StatusLocked || rec.Header().Get("Retry-After") != "2" || !strings.Contains(rec.Body.String(), "resource-locked") {
		t.Fatalf("busy: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	_ = held.Release(ctx)
}

func TestSerializeCancelsOnLoss(t *testing.T) {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	e := echo.New()
	cause := make(chan error, 1)
	e.POST("/x", func(c echo.Context) error {
		<-c.Request().Context().Done()
		cause <- context.Cause(c.Request().Context())
		return nil
	}, echomw.SerializeWithConfig(echomw.SerializeConfig{
		Locks:       locks,
		KeyFunc:     func(echo.Context) (string, error) { return "k", nil },
		LockOptions: []lockx.Option{lockx.WithLease(30 * time.Millisecond)},
	}))
	serve(e, "POST", "/x")
	if err := <-cause; !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", err)
	}
}

func TestSerializeKeyError(t *testing.T) {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	e := echo.New()
	e.POST("/x", func(c echo.Context) error { return nil }, echomw.Serialize(locks,
		func(echo.Context) (string, error) { return "", errors.New("no account in body") }))
	if rec := serve(e, "POST", "/x"); rec.Code != 400 {
		t.Fatalf("status %d", rec.Code)
	}
}
