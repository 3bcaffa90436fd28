package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// The unique-index fallback (Brandur's design): for work that writes to a
// database, keep the outcome in the same transaction as the work, under a
// UNIQUE key. The lock still keeps concurrent calls from running the work
// side by side; the unique key makes it correct even when the lock fails —
// a lease that ran out during a GC pause, a Redis failover that forgot a
// lock, a clock that jumped. Two transactions that claim one key cannot both
// commit: the second blocks on the first's uncommitted claim and, once the
// first commits, finds its outcome instead of running the work. A crash in
// the middle rolls back the work and the claim together, so there is nothing
// half done to re-run.

// TxStore is a ResultStore that can record an outcome in the same
// transaction as the work it is the outcome of. pglock.ResultStore
// implements it for pgx.Tx.
type TxStore[Tx any] interface {
	driver.ResultStore
	// InTx opens a transaction, claims key in it and calls body with it.
	// The claim inserts key's record under a UNIQUE constraint, so that a
	// concurrent InTx for key blocks at its own claim until this
	// transaction ends. If an unexpired outcome is committed for key, InTx
	// returns it and false without calling body.
	//
	// Otherwise, if body returns an error, the transaction rolls back and
	// InTx returns the error. If body returns an outcome, it is stored for
	// retention in the transaction, which commits, and InTx returns it and
	// true. A Failed outcome rolls back body's own writes first (body runs
	// in a savepoint after the claim), so only the outcome commits.
	InTx(ctx context.Context, key string, retention time.Duration, body func(ctx context.Context, tx Tx) (driver.Outcome, error)) (driver.Outcome, bool, error)
}

// RunTx is Guard.Run for work inside a database transaction: fn's writes
// and the outcome commit together, or not at all (see TxStore). The Guard
// provides the lock and the policies (retention, wait, retryable errors,
// sentinels); store holds the outcomes (give the Guard WithStore(store) too,
// so that its Run replays them as well). fn's context is
// cancelled if the lock is lost; the unique key then still keeps a second
// holder from committing.
func RunTx[Tx any](ctx context.Context, g *Guard, store TxStore[Tx], key string, fingerprint []byte, fn func(ctx context.Context, tx Tx) ([]byte, error)) (value []byte, replayed bool, err error) {
	if g == nil || store == nil {
		return nil, false, keyErr(key, &lockx.ArgError{Arg: "guard or store", Reason: "nil"})
	}
	k, err := g.check(ctx, key, fn != nil)
	if err != nil {
		return nil, false, err
	}
	if v, r, err, done := g.lookup(ctx, store, key, k, fingerprint); done {
		return v, r, err
	}
	l, err := g.lock(ctx, key, k)
	if errors.Is(err, lockx.ErrInProgress) {
		if v, r, lerr, done := g.lookup(ctx, store, key, k, fingerprint); done {
			return v, r, lerr
		}
	}
	if err != nil {
		return nil, false, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	return runTxLocked(ctx, g, store, key, k, fingerprint, func(ctx context.Context) (context.Context, func()) {
		fctx, cancel := context.WithCancelCause(l.Context())
		stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
		return fctx, func() { stop(); cancel(nil) }
	}, fn)
}

// runTxLocked runs the transaction once the lock is held (or, in tests of
// a double grant, believed held).
func runTxLocked[Tx any](ctx context.Context, g *Guard, store TxStore[Tx], key, k string, fp []byte,
	under func(context.Context) (context.Context, func()), fn func(context.Context, Tx) ([]byte, error)) ([]byte, bool, error) {
	var (
		v       []byte
		ferr    error
		retried bool
	)
	o, claimed, err := store.InTx(ctx, k, g.cfg.retention, func(ctx context.Context, tx Tx) (driver.Outcome, error) {
		fctx, done := under(ctx)
		defer done()
		v, ferr = fn(fctx, tx)
		if ferr != nil && (IsRetry(ferr) || g.cfg.retryable(ferr)) {
			retried = true
			return driver.Outcome{}, ferr
		}
		return g.outcome(fp, v, ferr), nil
	})
	switch {
	case retried:
		return nil, false, ferr
	case err != nil:
		return nil, false, keyErr(key, err)
	case !claimed:
		return g.replay(key, o, fp)
	}
	return v, false, ferr
}

// DoTx is RunTx with a typed result, stored as JSON like lockx.Idempotent's.
func DoTx[Tx, T any](ctx context.Context, g *Guard, store TxStore[Tx], key string, fn func(ctx context.Context, tx Tx) (T, error)) (T, error) {
	var zero, fresh T
	if fn == nil {
		return zero, keyErr(key, &lockx.ArgError{Arg: "fn", Reason: "nil"})
	}
	ran := false
	b, replayed, err := RunTx(ctx, g, store, key, nil, func(ctx context.Context, tx Tx) ([]byte, error) {
		ran = true
		v, err := fn(ctx, tx)
		fresh = v
		if err != nil {
			return nil, err
		}
		b, merr := json.Marshal(v)
		if merr != nil {
			return nil, fmt.Errorf("idempotency: encode result: %w", merr)
		}
		return b, nil
	})
	if ran && !replayed {
		return fresh, err
	}
	if err != nil {
		return zero, err
	}
	var v T
	if len(b) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			return zero, keyErr(key, fmt.Errorf("decode stored result: %w", err))
		}
	}
	return v, nil
}
