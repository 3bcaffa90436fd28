//go:build !lockx_pglock

package bench

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/lockx"
)

// newPGBackend reports that lockx/pglock is not part of this build: the rows
// stay in the tables, marked skipped. Build with -tags lockx_pglock to
// enable them.
func newPGBackend(*pgxpool.Pool) (lockx.Backend, error) {
	return nil, fmt.Errorf("%w: lockx/pglock not in this build (-tags lockx_pglock)", errSkip)
}
