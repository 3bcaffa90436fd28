package middleware_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
)

func ExampleFencing() {
	store := memlock.NewFenceStore() // redislock or pglock across replicas
	mux := http.NewServeMux()
	mux.Handle("PUT /docs/{id}", middleware.Fencing(store)(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			f, _ := middleware.FenceFromContext(r.Context())
			fmt.Println("write accepted with token", f.Token)
			w.WriteHeader(http.StatusNoContent)
		})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	put := func(token string) {
		req, _ := http.NewRequest("PUT", srv.URL+"/docs/1", strings.NewReader("…"))
		req.Header.Set("Lock-Key", "docs/1")
		req.Header.Set("Fencing-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			body, _ := io.ReadAll(resp.Body)
			fmt.Print(resp.Status, " ", resp.Header.Get("Content-Type"), "\n", string(body))
		}
	}
	put("34") // B, the current holder
	put("33") // A, back from a pause
	// Output:
	// write accepted with token 34
	// 409 Conflict application/problem+json
	// {"type":"https://github.com/lockx-go/lockx/blob/main/docs/fencing.md#stale-fencing-token","title":"Stale fencing token","status":409,"detail":"a write with token 34 has already been accepted for this resource; this lock was lost","resource":"docs/1","token":33,"seen":34}
}

func ExampleTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Header.Get("Lock-Key"), r.Header.Get("Fencing-Token"))
	}))
	defer srv.Close()
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	client := &http.Client{Transport: &middleware.Transport{}}

	err := locks.Do(ctx, "invoice/7", func(ctx context.Context) error {
		// Do's context carries the lock: every request made under it is
		// stamped with the key and the token.
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	})
	fmt.Println(err)
	// Output:
	// invoice/7 1
	// <nil>
}

func ExampleSerialize() {
	locks := lockx.New(memlock.New()) // redislock or pglock across replicas
	defer locks.Close()
	mux := http.NewServeMux()
	serialize := middleware.Serialize(locks, middleware.PathKey("account:", "id"))
	mux.Handle("POST /accounts/{id}/withdraw", serialize(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			l, _ := lockx.LockFromContext(r.Context())
			fmt.Println("withdrawing under", l.Key())
		})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/accounts/42/withdraw", "text/plain", nil)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// withdrawing under account:42
	// 200 OK
}
