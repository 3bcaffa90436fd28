package fencetest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// Postgres is the pglock fence store in a schema of its own, dropped at
// cleanup; pglock also issues the scenario's tokens.
var Postgres = Store{
	Name: "postgres",
	New: func(t *testing.T) (driver.FenceStore, driver.Backend) {
		pool, schema := PostgresSchema(t)
		b := pglock.New(pool, pglock.WithSchema(schema))
		t.Cleanup(func() { _ = b.Close() })
		return pglock.NewFenceStore(pool, pglock.WithSchema(schema)), b
	},
	Protects: true,
}

// PostgresSchema returns a pool on the machine's PostgreSQL and a fresh
// schema name; the schema is dropped and the pool closed at the end of t.
func PostgresSchema(t testing.TB) (*pgxpool.Pool, string) {
	dsn := testenv.PostgresURL(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := "lockx_test_" + RandomID()
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	return pool, schema
}
