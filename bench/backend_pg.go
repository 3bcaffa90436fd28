package bench

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// newPGBackend returns lockx's PostgreSQL backend over pool.
func newPGBackend(pool *pgxpool.Pool, opts ...pglock.Option) (driver.Backend, error) {
	return pglock.New(pool, opts...), nil
}
