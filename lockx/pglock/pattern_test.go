package pglock_test

import (
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/backendtest"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// patternBackend returns a factory of Backends on one schema, each with one
// holder session, as separate processes would have.
func patternBackend(e *env) func(t *testing.T) lockx.Backend {
	return func(t *testing.T) lockx.Backend {
		b := pglock.New(e.pool, pglock.WithSchema(e.schema), pglock.WithSessions(1))
		t.Cleanup(func() { _ = b.Close() })
		if err := b.Connect(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestRWConformance(t *testing.T) {
	e := newEnv(t, 40)
	lockxtest.RunRW(t, patternBackend(e))
}

func TestSemaphoreConformance(t *testing.T) {
	e := newEnv(t, 40)
	lockxtest.RunSemaphore(t, patternBackend(e))
}

// TestSemaphoreAcrossProcesses has several Backends (processes), each with
// several goroutines whose decisions it combines, take weighted permits of
// one semaphore: the limit is never exceeded at any moment.
func TestSemaphoreAcrossProcesses(t *testing.T) {
	e := newEnv(t, 24)
	backendtest.SemaphoreContention(t, func() *lockx.Client {
		c, _ := e.client(t, pglock.WithSessions(1))
		return c
	}, 3, 3, 4, 8, true)
}
