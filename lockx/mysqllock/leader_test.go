package mysqllock_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/mysqllock"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

// TestLeader runs the leader-election suite over MariaDB/MySQL, in both
// modes: each instance is a client over a backend of its own.
func TestLeader(t *testing.T) {
	for _, mode := range []struct {
		name string
		new  func(db *sql.DB, prefix string) driver.Backend
	}{
		{"Session", func(db *sql.DB, prefix string) driver.Backend { return mysqllock.New(db, fastOpts(prefix)...) }},
		{"Table", func(db *sql.DB, prefix string) driver.Backend { return mysqllock.NewTable(db, fastOpts(prefix)...) }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			db, prefix := openDB(t)
			if err := mysqllock.Migrate(context.Background(), db, mysqllock.WithTablePrefix(prefix)); err != nil {
				t.Fatal(err)
			}
			leadertest.Run(t, func(t *testing.T) *lockx.Client {
				c := lockx.New(mode.new(db, prefix))
				t.Cleanup(func() { _ = c.Close() })
				return c
			})
		})
	}
}
