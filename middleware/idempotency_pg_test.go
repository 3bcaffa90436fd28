package middleware_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/idempotency"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
)

// pgGuards returns n guards over n pglock backends, each on its own pool
// (its own process), sharing one database and a fresh schema: n instances
// sharing PostgreSQL for locks and responses.
func pgGuards(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard {
	dsn := testenv.PostgresURL(t)
	schema := "lockx_mw_test_" + strings.ToLower(randText()[:10])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 6 // 3 holder sessions, the listener, the responses
		if pools[i], err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pools[i].Close)
	}
	// Cleanups run last first: the clients made below close before the pools.
	return guardsOver(func(i int) driver.Backend { return pglock.New(pools[i], pglock.WithSchema(schema)) })(t, n, opts...)
}

func TestIdempotencyPostgres(t *testing.T) { idemtest.RunHTTP(t, idemServer, pgGuards) }
