package pglock_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

// TestLeader runs the leader-election suite over PostgreSQL: each instance
// is a client over a backend (a session) of its own in one schema.
func TestLeader(t *testing.T) {
	e := newEnv(t, 16)
	leadertest.Run(t, func(t *testing.T) *lockx.Client {
		c, _ := e.client(t)
		return c
	})
}
