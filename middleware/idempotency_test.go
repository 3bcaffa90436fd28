package middleware_test

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/middleware"
	"github.com/lockx-go/lockx/patterns/idempotency"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
)

func idemServer(t *testing.T, guard lockx.Idempotency, app http.Handler) http.Handler {
	return middleware.Idempotency(middleware.IdempotencyConfig{
		Guard:            guard,
		MaxBodyBytes:     idemtest.MaxBodyBytes,
		MaxResponseBytes: idemtest.MaxResponseBytes,
		Principal:        func(r *http.Request) (string, error) { return r.Header.Get(idemtest.PrincipalHeader), nil },
	})(app)
}

// guardsOver returns n guards, each over its own client of backend(i):
// n service instances sharing one store.
func guardsOver(backend func(i int) driver.Backend) idemtest.NewGuards {
	return func(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard {
		gs := make([]*idempotency.Guard, n)
		for i := range gs {
			locks := lockx.New(backend(i))
			t.Cleanup(func() { locks.Close() })
			g, err := idempotency.New(locks, opts...)
			if err != nil {
				t.Fatal(err)
			}
			gs[i] = g
		}
		return gs
	}
}

func memGuards(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard {
	b := memlock.New()
	return guardsOver(func(int) driver.Backend { return b })(t, n, opts...)
}

func redisGuards(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	prefix := redislock.WithPrefix("lockxtest:" + strings.ReplaceAll(t.Name(), "/", ":") + ":" + randText() + ":")
	return guardsOver(func(int) driver.Backend { return redislock.New(rdb, prefix) })(t, n, opts...)
}

func TestIdempotencyMem(t *testing.T)   { idemtest.RunHTTP(t, idemServer, memGuards) }
func TestIdempotencyRedis(t *testing.T) { idemtest.RunHTTP(t, idemServer, redisGuards) }

func TestIdempotencyStoreUnavailable(t *testing.T) {
	down := driver.Unavailable("get", errors.New("connection refused"))
	h := idemServer(t, idemtest.StaticGuard{Err: down}, http.NotFoundHandler())
	req := httptest.NewRequest("POST", "/x", nil)
	req.Header.Set("Idempotency-Key", `"`+randText()+`"`)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" ||
		w.Header().Get("Content-Type") != "application/problem+json" || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("got %d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestIdempotencyPrincipalError(t *testing.T) {
	g := memGuards(t, 1)[0]
	h := middleware.Idempotency(middleware.IdempotencyConfig{
		Guard:     g,
		Principal: func(*http.Request) (string, error) { return "", errors.New("no session") },
	})(http.NotFoundHandler())
	req := httptest.NewRequest("POST", "/x", nil)
	req.Header.Set("Idempotency-Key", `"`+randText()+`"`)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("got %d %s", w.Code, w.Body)
	}
}

func TestIdempotencyOptionalAndSkipper(t *testing.T) {
	g := memGuards(t, 1)[0]
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for name, cfg := range map[string]middleware.IdempotencyConfig{
		"optional": {Guard: g, Optional: true},
		"skipper":  {Guard: g, Skipper: func(*http.Request) bool { return true }},
		"methods":  {Guard: g, Methods: []string{"PUT"}},
	} {
		w := httptest.NewRecorder()
		middleware.Idempotency(cfg)(ok).ServeHTTP(w, httptest.NewRequest("POST", "/x", nil))
		if w.Code != http.StatusTeapot {
			t.Errorf("%s: got %d, want the handler's answer", name, w.Code)
		}
	}
}

func TestIdempotencyHEADReplayAndDefaults(t *testing.T) {
	g := memGuards(t, 1)[0]
	runs := 0
	h := middleware.Idempotency(middleware.IdempotencyConfig{Guard: g, Methods: []string{"POST", "HEAD"}})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs++; w.Write([]byte("hello")) }))
	key := `"` + randText() + `"`
	for i, auth := range []string{"Bearer a", "Bearer a", "Bearer b"} {
		req := httptest.NewRequest("POST", "/x", nil)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", auth) // the default principal
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		replayed := w.Header().Get("Idempotent-Replayed") == "true"
		if w.Body.String() != "hello" || replayed != (i == 1) {
			t.Fatalf("request %d (%s): %q replayed=%v", i, auth, w.Body, replayed)
		}
	}
	if runs != 2 {
		t.Fatalf("handler ran %d times, want 2 (one per credential)", runs)
	}
}

func TestNewReplayerErrors(t *testing.T) {
	if _, err := middleware.NewReplayer(middleware.IdempotencyConfig{}); err == nil {
		t.Error("no guard accepted")
	}
	defer func() {
		if recover() == nil {
			t.Error("Idempotency without a guard did not panic")
		}
	}()
	middleware.Idempotency(middleware.IdempotencyConfig{})
}

func TestParseKey(t *testing.T) {
	g := memGuards(t, 1)[0]
	rp, _ := middleware.NewReplayer(middleware.IdempotencyConfig{Guard: g})
	lenient, _ := middleware.NewReplayer(middleware.IdempotencyConfig{Guard: g, AcceptUnquoted: true})
	for _, tc := range []struct {
		in, want string
		lenient  bool
		ok       bool
	}{
		{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", false, true},
		{` "8e03978e-40d5-43e8-bc93-6894a57f9324" `, "8e03978e-40d5-43e8-bc93-6894a57f9324", false, true},
		{`8e03978e-40d5-43e8-bc93-6894a57f9324`, "", false, false},
		{`8e03978e-40d5-43e8-bc93-6894a57f9324`, "8e03978e-40d5-43e8-bc93-6894a57f9324", true, true},
		{`"abc\"def"`, "", false, false}, // '"' is outside KeyChars
		{`"abc\qdef123"`, "", false, false},
		{`"12345678"`, "", false, false}, // 24 bits
		{`"01HZX3V9Q8K2M4N6P8R0T2V4X6"`, "01HZX3V9Q8K2M4N6P8R0T2V4X6", false, true},
	} {
		r := rp
		if tc.lenient {
			r = lenient
		}
		got, err := r.ParseKey(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseKey(%s) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzParseKey: the parser never panics, accepts only keys within the
// limits, and a key it accepts, quoted again, parses back to itself.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `"a\\b"`, `"`, `""`, `"x";a=1`, "\"\xff\"", `"\"`} {
		f.Add(s)
	}
	rp, _ := middleware.NewReplayer(middleware.IdempotencyConfig{Guard: idemtest.StaticGuard{}, KeyChars: middleware.DefaultKeyChars + `"\ `})
	f.Fuzz(func(t *testing.T, v string) {
		key, err := rp.ParseKey(v)
		if err != nil {
			return
		}
		if len(key) < middleware.DefaultMinKeyLength || len(key) > middleware.DefaultMaxKeyLength {
			t.Fatalf("accepted %q of length %d", key, len(key))
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := rp.ParseKey(quoted); err != nil || again != key {
			t.Fatalf("round trip of %q: %q, %v", key, again, err)
		}
	})
}

func randText() string { return rand.Text() }
