package mysqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
	"github.com/lockx-go/lockx/lockx/driver"
)

// tables holds the quoted table names of one prefix.
type tables struct {
	prefix string
	fence  string // `<prefix>fence`: session mode's grants; its AUTO_INCREMENT issues the tokens (InnoDB)
	queue  string // `<prefix>queue`: fair waiters (MEMORY)
	lease  string // `<prefix>lease`: lease-table mode locks (InnoDB)
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func newTables(prefix string) tables {
	return tables{
		prefix: prefix,
		fence:  quoteIdent(prefix + "fence"),
		queue:  quoteIdent(prefix + "queue"),
		lease:  quoteIdent(prefix + "lease"),
	}
}

// lockName maps a key to its GET_LOCK name and table key: the prefix and
// the SHA-256 of the key in hex, cut to 64 characters (GET_LOCK's limit).
// With a 20-character prefix 176 bits remain, so collisions (which would
// only cost false contention) do not happen in practice.
func (t tables) lockName(key string) string {
	sum := sha256.Sum256([]byte(key))
	n := t.prefix + hex.EncodeToString(sum[:])
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

func (t tables) ddl() []string {
	return []string{
		"CREATE TABLE IF NOT EXISTS " + t.fence + " (name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY," +
			" k VARBINARY(255) NOT NULL, owner VARBINARY(64) NOT NULL, token BIGINT UNSIGNED NOT NULL AUTO_INCREMENT," +
			" expires DATETIME(6) NOT NULL, conn BIGINT UNSIGNED NOT NULL, KEY (token)) ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS " + t.queue + " (name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL," +
			" owner VARBINARY(64) NOT NULL, seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, expires DATETIME(6) NOT NULL," +
			" PRIMARY KEY (name, owner) USING BTREE, KEY (seq)) ENGINE=MEMORY",
		"CREATE TABLE IF NOT EXISTS " + t.lease + " (name VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY," +
			" k VARBINARY(255) NOT NULL, owner VARBINARY(64) NOT NULL, token BIGINT UNSIGNED NOT NULL," +
			" expires DATETIME(6) NOT NULL, g TINYINT NOT NULL DEFAULT 0) ENGINE=InnoDB",
	}
}

// Migrate creates the tables of the prefix given by opts (WithTablePrefix),
// for deployments that run Backends with WithoutAutoMigrate. It is
// idempotent. It needs CREATE and INSERT on the database; a Backend needs
// SELECT, INSERT, UPDATE and DELETE on the tables.
func Migrate(ctx context.Context, db *sql.DB, opts ...Option) error {
	cfg := newConfig(opts)
	if cfg.err != nil {
		return cfg.err
	}
	return migrate(ctx, db, newTables(cfg.prefix))
}

func migrate(ctx context.Context, db *sql.DB, t tables) error {
	// DDL waits for metadata locks; bound the wait (server default: a day)
	// on a connection of its own that is discarded afterwards, so the
	// setting does not leak into the pool.
	c, err := db.Conn(ctx)
	if err != nil {
		return driver.Unavailable("migrate", err)
	}
	defer discard(c)
	if _, err := c.ExecContext(ctx, "SET SESSION lock_wait_timeout = 10"); err != nil {
		return driver.Unavailable("migrate", err)
	}
	for _, s := range t.ddl() {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return driver.Unavailable("migrate", err)
		}
	}
	return nil
}

// migrated remembers the (db, prefix) pairs migrated by this process, so
// that Backends created per request or per test do not each run DDL.
var migrated sync.Map

// migrator runs migrate once successfully.
type migrator struct {
	mu   sync.Mutex
	done bool
}

func (m *migrator) ensure(ctx context.Context, cfg *config, db *sql.DB, t tables) error {
	if !cfg.autoMigrate {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return nil
	}
	type dbPrefix struct {
		db     *sql.DB
		prefix string
	}
	k := dbPrefix{db, t.prefix}
	if _, ok := migrated.Load(k); !ok {
		if err := migrate(ctx, db, t); err != nil {
			return err
		}
		migrated.Store(k, true)
	}
	m.done = true
	return nil
}

// queueOK is a condition true when no live fair waiter other than the
// owner queues ahead of it for the name. Parameters: name, owner, name,
// owner.
func (t tables) queueOK() string {
	return "NOT EXISTS (SELECT 1 FROM " + t.queue + " q WHERE q.name = ? AND q.expires > NOW(6) AND q.owner <> ?" +
		" AND q.seq < COALESCE((SELECT q2.seq FROM " + t.queue + " q2 WHERE q2.name = ? AND q2.owner = ? AND q2.expires > NOW(6)), 18446744073709551615))"
}

// connDead reports whether err means the connection is gone (or must be
// treated as gone): anything but a server's SQL error, or a server error
// that ends the session.
func connDead(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1053, 1927, 2006, 2013, 1317:
			return true
		}
		return false
	}
	return true
}

func micros(d interface{ Microseconds() int64 }) int64 {
	m := d.Microseconds()
	if m < 1 {
		m = 1
	}
	return m
}
