package middleware_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

func ExampleIdempotency() {
	locks := lockx.New(memlock.New()) // redislock or pglock across replicas
	defer locks.Close()
	guard, _ := idempotency.New(locks)

	charges := 0
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d}`, charges)
	})
	h := middleware.Idempotency(middleware.IdempotencyConfig{
		Guard: guard,
		// Records are kept per caller; here the caller is a header set by
		// an authenticating proxy.
		Principal: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
	})(pay)

	send := func(key string) {
		req := httptest.NewRequest("POST", "/payments", strings.NewReader(`{"amount":1999}`))
		req.Header.Set("X-User", "alice")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(w.Body.String()))
	}
	send(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	send(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`) // a retry: replayed, not charged again
	send("")                                       // no key: refused
	// Output:
	// 201  {"charge":1}
	// 201 true {"charge":1}
	// 400  {"type":"https://github.com/lockx-go/lockx/blob/main/docs/patterns/idempotency.md#idempotency-key-missing","title":"Idempotency-Key header required","status":400,"detail":"this operation requires an Idempotency-Key header, e.g. Idempotency-Key: \"8e03978e-40d5-43e8-bc93-6894a57f9324\""}
}
