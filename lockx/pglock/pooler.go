package pglock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lockx-go/lockx/lockx/driver"
)

// ErrTransactionPooler reports that the backend reaches PostgreSQL through
// a pooler that hands the server connection to other clients between
// transactions (PgBouncer with pool_mode = transaction or statement). A
// session advisory lock belongs to the server connection, so there it would
// be left behind for whichever client gets the connection next — shared
// with it, or leaked when this one is done. The backend refuses to take
// any; connect it to the server itself or through a session-mode pool.
// The error also matches errors.ErrUnsupported and driver.ErrInvalidArgument
// (the pool given to New is unfit), so Acquire returns it at once instead
// of retrying.
var ErrTransactionPooler = errors.New("pglock: PostgreSQL is reached through a transaction-mode pooler (such as PgBouncer with pool_mode = transaction): session advisory locks are not safe there; connect to the server or through a session-mode pool")

// checkPooler tells a direct connection from one through a pooler that
// shares server connections between transactions. PostgreSQL reports the
// server process's id at connection time (BackendKeyData); a proxy such as
// PgBouncer makes up its own, so a mismatch with pg_backend_pid() means a
// proxy. Then the test is whether the proxy keeps the server connection to
// this client: a second client asks for its process id, and this one asks
// again. A transaction-mode pooler gives the idle server connection to the
// second client (PgBouncer reuses the most recently used one) or this
// client a different one; a session-mode pooler never does either.
func checkPooler(ctx context.Context, pg *pgconn.PgConn, cfg *pgconn.Config) error {
	first, err := backendPID(ctx, pg)
	if err != nil || first == pg.PID() {
		return err
	}
	other, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("pglock: probing the proxy in front of PostgreSQL: %w", err)
	}
	defer other.Close(context.WithoutCancel(ctx))
	theirs, err := backendPID(ctx, other)
	if err != nil {
		return err
	}
	again, err := backendPID(ctx, pg)
	if err != nil {
		return err
	}
	if theirs == first || again != first {
		return fmt.Errorf("%w (server process %d served this connection, then %s): %w: %w",
			ErrTransactionPooler, first, servedBy(theirs, again, first), errors.ErrUnsupported,
			&driver.ArgError{Arg: "pool", Reason: "reaches PostgreSQL through a transaction-mode pooler"})
	}
	return nil
}

func servedBy(theirs, again, first uint32) string {
	if theirs == first {
		return "another client's"
	}
	return "process " + strconv.FormatUint(uint64(again), 10) + " this one's next transaction"
}

// backendPID asks the server which process serves pg, over the simple
// protocol (nothing prepared: a pooler may not keep prepared statements).
func backendPID(ctx context.Context, pg *pgconn.PgConn) (uint32, error) {
	res := pg.Exec(ctx, "SELECT pg_backend_pid()")
	rs, err := res.ReadAll()
	if err != nil {
		return 0, err
	}
	if len(rs) != 1 || len(rs[0].Rows) != 1 || len(rs[0].Rows[0]) != 1 {
		return 0, errors.New("pglock: pg_backend_pid() returned no row")
	}
	n, err := strconv.ParseUint(string(rs[0].Rows[0][0]), 10, 32)
	return uint32(n), err
}
