package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
)

func wantStale(t *testing.T, err error, token, seen lockx.Token) {
	t.Helper()
	var se *lockx.StaleTokenError
	if !errors.As(err, &se) || !errors.Is(err, lockx.ErrStaleToken) || se.Token != token || se.Seen != seen {
		t.Fatalf("got %v, want stale token %d (seen %d)", err, token, seen)
	}
}

func TestFenceStore(t *testing.T) {
	e := newEnv(t, 8)
	s := pglock.NewFenceStore(e.pool, pglock.WithSchema(e.schema)) // creates its table on first use
	ctx := ctxT(t, 30*time.Second)
	for _, r := range []string{"docs/1", "\x00binary\xff"} {
		if err := s.Fence(ctx, r, 5); err != nil {
			t.Fatal(err)
		}
		if err := s.Fence(ctx, r, 5); err != nil {
			t.Fatalf("equal token refused: %v", err)
		}
		wantStale(t, s.Fence(ctx, r, 4), 4, 5)
		if err := s.Fence(ctx, r, lockx.MaxToken); err != nil {
			t.Fatal(err)
		}
		wantStale(t, s.Fence(ctx, r, 6), 6, lockx.MaxToken)
	}
	if err := s.Fence(ctx, "docs/2", 1); err != nil {
		t.Fatalf("resources are independent: %v", err)
	}
	for _, bad := range []struct {
		r   string
		tok lockx.Token
	}{{"", 1}, {"r", 0}, {"r", lockx.MaxToken + 1}} {
		if err := s.Fence(ctx, bad.r, bad.tok); !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("Fence(%q, %d) = %v", bad.r, bad.tok, err)
		}
	}
	if err := pglock.NewFenceStore(nil).Fence(ctx, "r", 1); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("nil pool: %v", err)
	}
}

func TestFenceStoreWithoutAutoMigrate(t *testing.T) {
	e := newEnv(t, 4)
	ctx := ctxT(t, 30*time.Second)
	s := pglock.NewFenceStore(e.pool, pglock.WithSchema(e.schema), pglock.WithoutAutoMigrate())
	if err := s.Fence(ctx, "r", 1); !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("missing table: %v, want ErrUnavailable", err)
	}
	if err := pglock.MigrateFences(ctx, e.pool, pglock.WithSchema(e.schema)); err != nil {
		t.Fatal(err)
	}
	if err := pglock.MigrateFences(ctx, e.pool, pglock.WithSchema(e.schema)); err != nil {
		t.Fatalf("second migration: %v", err)
	}
	if err := s.Fence(ctx, "r", 1); err != nil {
		t.Fatal(err)
	}
}

// docsTable creates a table to write under fences and returns its name.
func docsTable(t *testing.T, e *env) (*pglock.FenceStore, string) {
	ctx := ctxT(t, 30*time.Second)
	if err := pglock.MigrateFences(ctx, e.pool, pglock.WithSchema(e.schema)); err != nil {
		t.Fatal(err)
	}
	table := pgx.Identifier{e.schema, "docs"}.Sanitize()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE `+table+` (id int PRIMARY KEY, body text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pglock.NewFenceStore(e.pool, pglock.WithSchema(e.schema)), table
}

func fencedWrite(ctx context.Context, e *env, s *pglock.FenceStore, table string, token lockx.Token, body string) error {
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := s.FencedExec(ctx, tx, "docs/1", token,
		`INSERT INTO `+table+` (id, body) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body`, body); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func readDoc(t *testing.T, e *env, table string) string {
	var body string
	if err := e.pool.QueryRow(t.Context(), `SELECT body FROM `+table+` WHERE id = 1`).Scan(&body); err != nil {
		t.Fatal(err)
	}
	return body
}

func TestFencedExec(t *testing.T) {
	e := newEnv(t, 8)
	s, table := docsTable(t, e)
	ctx := ctxT(t, 30*time.Second)

	if err := fencedWrite(ctx, e, s, table, 34, "B"); err != nil {
		t.Fatal(err)
	}
	wantStale(t, fencedWrite(ctx, e, s, table, 33, "A"), 33, 34)
	if got := readDoc(t, e, table); got != "B" {
		t.Fatalf("stale write landed: %q", got)
	}
	if err := fencedWrite(ctx, e, s, table, 34, "B2"); err != nil {
		t.Fatalf("same holder writes again: %v", err)
	}
	// A rolled-back fenced write does not advance the fence.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FencedExec(ctx, tx, "docs/1", 40, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	if err := fencedWrite(ctx, e, s, table, 35, "C"); err != nil {
		t.Fatalf("fence advanced by a rolled-back transaction: %v", err)
	}
	// The user's statement failing is its own error, not a fencing verdict.
	err = fencedWrite(ctx, e, s, table, 36, "")
	if err != nil {
		t.Fatalf("empty body is valid: %v", err)
	}
	tx, _ = e.pool.Begin(ctx)
	defer tx.Rollback(ctx)
	if _, err := s.FencedExec(ctx, tx, "docs/1", 36, `INSERT INTO nowhere VALUES (1)`); err == nil || errors.Is(err, lockx.ErrStaleToken) {
		t.Fatalf("bad statement: %v", err)
	}
	if _, err := s.FencedExec(ctx, nil, "docs/1", 36, `SELECT 1`); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("nil tx: %v", err)
	}
}

// The older holder fenced first but has not committed: the newer holder's
// fenced write waits for it and lands last.
func TestFencedExecOrdersWriters(t *testing.T) {
	e := newEnv(t, 8)
	s, table := docsTable(t, e)
	ctx := ctxT(t, 30*time.Second)

	txA, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback(ctx)
	if _, err := s.FencedExec(ctx, txA, "docs/1", 33,
		`INSERT INTO `+table+` (id, body) VALUES (1, 'A')`); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() { bDone <- fencedWrite(ctx, e, s, table, 34, "B") }()
	select {
	case err := <-bDone:
		t.Fatalf("B's fenced write did not wait for A's transaction: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("B: %v", err)
	}
	if got := readDoc(t, e, table); got != "B" {
		t.Fatalf("document %q, want B's write last", got)
	}
}

func TestFencedExecDefaultSchema(t *testing.T) {
	e := newEnv(t, 4)
	ctx := ctxT(t, 30*time.Second)
	if err := pglock.MigrateFences(ctx, e.pool); err != nil {
		t.Fatal(err)
	}
	resource := "lockxtest/" + randHex(8)
	t.Cleanup(func() {
		_, _ = e.pool.Exec(context.Background(), `DELETE FROM lockx.lockx_fences WHERE resource = $1`, []byte(resource))
	})
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := pglock.FencedExec(ctx, tx, resource, 2, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	wantStale(t, func() error { _, err := pglock.FencedExec(ctx, tx, resource, 1, `SELECT 1`); return err }(), 1, 2)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestBackendIsFenceStore(t *testing.T) {
	e := newEnv(t, 8)
	ctx := ctxT(t, 30*time.Second)
	locks := lockx.New(pglock.New(e.pool, pglock.WithSchema(e.schema)))
	defer locks.Close()
	var store driver.FenceStore
	ok := driver.As(locks.Backend(), &store)
	if !ok {
		t.Fatal("pglock.Backend does not offer driver.FenceStore")
	}
	l, err := locks.Acquire(ctx, "docs/1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if err := store.Fence(ctx, "docs/1", l.Token()); err != nil {
		t.Fatal(err)
	}
	// The Backend and a FenceStore of the same schema share the fences.
	s := pglock.NewFenceStore(e.pool, pglock.WithSchema(e.schema))
	if l.Token() > 1 {
		wantStale(t, s.Fence(ctx, "docs/1", l.Token()-1), l.Token()-1, l.Token())
	}
	if err := s.Fence(ctx, "docs/1", l.Token()+1); err != nil {
		t.Fatal(err)
	}
	wantStale(t, store.Fence(ctx, "docs/1", l.Token()), l.Token(), l.Token()+1)
}
