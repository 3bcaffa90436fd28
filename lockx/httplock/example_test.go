package httplock_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/lockx-go/lockx/internal/lockxd"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/httplock"
	"github.com/lockx-go/lockx/lockx/memlock"
)

func Example() {
	// A lockxd over an in-process backend, with one tenant whose API key
	// is "s3cret". In production: lockxd --redis … and its URL here.
	srv := lockxd.NewServer(memlock.New(), lockxd.Config{Tenants: []lockxd.TenantConfig{{Tenant: "shop", SHA256: lockxd.HashKey("s3cret")}}})
	ts := httptest.NewServer(srv)
	defer ts.Close()

	locks := lockx.New(httplock.New(ts.URL, "s3cret"))
	defer locks.Close()

	ctx := context.Background()
	l, err := locks.Acquire(ctx, "orders/42")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held, token", l.Token())
	_, err = locks.TryAcquire(ctx, "orders/42")
	fmt.Println("second try:", err)
	fmt.Println("release:", l.Release(ctx))
	// Output:
	// held, token 1
	// second try: lockx: acquire "orders/42": lock not acquired
	// release: <nil>
}
