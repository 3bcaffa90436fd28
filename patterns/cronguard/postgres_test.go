package cronguard_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

// pgBackends returns a factory of backends (crashBackend), each on a pool of its own as
// separate processes would have (at most 4 connections: one holder session,
// the listener, two for queries; PostgreSQL's 100 are shared by every test
// on the machine), in a schema of the test's own dropped at cleanup.
func pgBackends(t *testing.T) func() driver.Backend {
	dsn, schema := pgSchema(t)
	return func() driver.Backend {
		b, closeBackend, err := crashBackend("postgres", dsn, schema)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeBackend)
		return b
	}
}

// pgSchema returns the PostgreSQL DSN and a schema of the test's own,
// dropped at cleanup.
func pgSchema(t *testing.T) (dsn, schema string) {
	dsn = testenv.PostgresURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "cronguard_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { // registered first: runs after every pool and backend is closed
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("cleanup connect: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	return dsn, schema
}

func TestFleetPostgres(t *testing.T) {
	t.Parallel()
	// 2 scenarios × 5 instances × 4 connections.
	newBackend := pgBackends(t)
	fleetSuite(t, func(t *testing.T) *lockx.Client { return clientOf(t, newBackend()) }, false, "scheduled", "atleastonce")
}

// The PostgreSQL kill tests are not parallel: they run (and close their
// connections) before the parallel fleet tests start.
func TestRunnerKilledAtLeastOncePostgres(t *testing.T) {
	newBackend := pgBackends(t)
	var rs driver.ResultStore
	driver.As(newBackend(), &rs)
	store, err := cronguard.NewBackendStore(rs, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	killedAtLeastOnce(t, newBackend, store)
}

// A killed runner's PostgreSQL session ends, and its advisory lock with it:
// the durable claim of a BackendStore keeps the trigger from running again.
func TestRunnerKilledAtMostOncePostgres(t *testing.T) {
	newBackend := pgBackends(t)
	var rs driver.ResultStore
	driver.As(newBackend(), &rs)
	store, err := cronguard.NewBackendStore(rs, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	killedAtMostOnce(t, newBackend, cronguard.WithStore(store))
}

// pglock's Clock is the server's clock_timestamp(): on this machine it
// agrees with the local clock, and triggers named by it run.
func TestBackendTimePostgres(t *testing.T) {
	b := pgBackends(t)()
	var clock driver.Clock
	ok := driver.As(b, &clock)
	if !ok {
		t.Fatal("pglock.Backend does not implement driver.Clock")
	}
	now, err := clock.Now(context.Background())
	if d := time.Since(now); err != nil || d < -time.Second || d > time.Second {
		t.Fatalf("Now = %v, %v: %v from the local clock", now, err, d)
	}
	job, err := cronguard.Guard(clientOf(t, b), jobName(t), func(context.Context) error { return nil },
		cronguard.Every(time.Minute), cronguard.UsingBackendTime())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.RunNow(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A killed runner's session ends with its process, and its advisory lock
// with it: the durable claim in the BackendStore keeps the trigger taken.
func TestCrashAtMostOncePostgres(t *testing.T) {
	dsn, schema := pgSchema(t)
	crashAtMostOnce(t, "postgres", dsn, schema)
}

func TestCrashAtLeastOncePostgres(t *testing.T) {
	dsn, schema := pgSchema(t)
	crashAtLeastOnce(t, "postgres", dsn, schema)
}
