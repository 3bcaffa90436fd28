package httplock_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

// TestLeader runs the leader-election suite through lockxd, with Redis and
// with PostgreSQL behind it: each instance is a client of its own.
func TestLeader(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			url := serve(t, bc.new(t))
			leadertest.Run(t, func(t *testing.T) *lockx.Client {
				c := lockx.New(client(t, url, "key-a"))
				t.Cleanup(func() { _ = c.Close() })
				return c
			})
		})
	}
}
