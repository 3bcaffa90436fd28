package mysqllock_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/mysqllock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// openDB opens the test database; the returned prefix is unique to the test
// and its tables are dropped at cleanup.
func openDB(t testing.TB) (*sql.DB, string) {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	if strings.Contains(dsn, "?") {
		dsn += "&parseTime=true&interpolateParams=true"
	} else {
		dsn += "?parseTime=true&interpolateParams=true"
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "lxt" + hex.EncodeToString(b[:]) + "_"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, tb := range []string{"fence", "queue", "lease"} {
			_, _ = db.ExecContext(ctx, "SET STATEMENT lock_wait_timeout = 5 FOR DROP TABLE IF EXISTS `"+prefix+tb+"`")
		}
		_ = db.Close()
	})
	return db, prefix
}

func fastOpts(prefix string) []mysqllock.Option {
	return []mysqllock.Option{mysqllock.WithTablePrefix(prefix), mysqllock.WithHealthInterval(200 * time.Millisecond), mysqllock.WithPollInterval(50 * time.Millisecond)}
}

func TestConformanceSession(t *testing.T) {
	db, prefix := openDB(t)
	if err := mysqllock.Migrate(context.Background(), db, mysqllock.WithTablePrefix(prefix)); err != nil {
		t.Fatal(err)
	}
	lockxtest.Run(t, func(t *testing.T) driver.Backend {
		return mysqllock.New(db, fastOpts(prefix)...)
	})
}

func TestConformanceTable(t *testing.T) {
	db, prefix := openDB(t)
	if err := mysqllock.Migrate(context.Background(), db, mysqllock.WithTablePrefix(prefix)); err != nil {
		t.Fatal(err)
	}
	lockxtest.Run(t, func(t *testing.T) driver.Backend {
		return mysqllock.NewTable(db, fastOpts(prefix)...)
	})
}
