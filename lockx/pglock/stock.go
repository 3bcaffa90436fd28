package pglock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Stock tables, in pglock's schema. They are logged tables: inventory and
// orders must survive a crash.
//
//	lockx_stock_sku    (sku PK, segs)                      one row per SKU
//	lockx_stock        (sku, seg PK, n ≥ 0, supplied)      one row per segment
//	lockx_stock_entry  (sku, id PK, seg, buyer, qty, deadline)  the ledgers
//	lockx_stock_quota  (sku, buyer PK, n)                  purchase counts
//	lockx_orders       (sku, id PK, buyer, qty, uniq, state)
//	  + UNIQUE (sku, buyer) WHERE uniq AND state = 'live'
//	lockx_order_supply (sku PK, supplied, ordered)         the supply cap
//	  + CHECK (ordered <= supplied)
//
// A deduction is one statement, UPDATE … SET n = n - q WHERE n >= q joined
// with the INSERT of its ledger entry: the row lock of the segment is held
// for that statement only, and the CHECK (n >= 0) backs the WHERE.
const stockDDL = `
CREATE TABLE IF NOT EXISTS {sku} (
	sku text PRIMARY KEY,
	segs integer NOT NULL);
CREATE TABLE IF NOT EXISTS {stock} (
	sku text NOT NULL,
	seg integer NOT NULL,
	n bigint NOT NULL CHECK (n >= 0),
	supplied bigint NOT NULL,
	PRIMARY KEY (sku, seg));
CREATE TABLE IF NOT EXISTS {entry} (
	sku text NOT NULL,
	id text NOT NULL,
	seg integer NOT NULL,
	buyer text NOT NULL,
	qty bigint NOT NULL CHECK (qty > 0),
	deadline timestamptz,
	PRIMARY KEY (sku, id));
CREATE INDEX IF NOT EXISTS lockx_stock_entry_deadline ON {entry} (sku, seg, deadline) WHERE deadline IS NOT NULL;
CREATE TABLE IF NOT EXISTS {quota} (
	sku text NOT NULL,
	buyer text NOT NULL,
	n bigint NOT NULL,
	PRIMARY KEY (sku, buyer));
CREATE TABLE IF NOT EXISTS {orders} (
	sku text NOT NULL,
	id text NOT NULL,
	buyer text NOT NULL,
	qty bigint NOT NULL,
	uniq boolean NOT NULL,
	state text NOT NULL DEFAULT 'live',
	created timestamptz NOT NULL DEFAULT clock_timestamp(),
	PRIMARY KEY (sku, id));
CREATE UNIQUE INDEX IF NOT EXISTS lockx_orders_one_per_buyer ON {orders} (sku, buyer) WHERE uniq AND state = 'live';
CREATE TABLE IF NOT EXISTS {supply} (
	sku text PRIMARY KEY,
	supplied bigint NOT NULL,
	ordered bigint NOT NULL,
	CONSTRAINT lockx_order_supply_cap CHECK (ordered <= supplied));
`

type stockNames struct{ sku, stock, entry, quota, orders, supply string }

func newStockNames(schema string) stockNames {
	id := func(t string) string { return pgx.Identifier{schema, t}.Sanitize() }
	return stockNames{id("lockx_stock_sku"), id("lockx_stock"), id("lockx_stock_entry"), id("lockx_stock_quota"), id("lockx_orders"), id("lockx_order_supply")}
}

func (n stockNames) expand(q string) string {
	return strings.NewReplacer("{sku}", n.sku, "{stock}", n.stock, "{entry}", n.entry, "{quota}", n.quota, "{orders}", n.orders, "{supply}", n.supply).Replace(q)
}

// MigrateStock creates pglock's schema (Migrate) and the stock and order
// tables if they are missing (in a deployment made by an older version, the
// supply cap's table lockx_order_supply: its SKUs have no cap until
// InitSupply). It is idempotent and safe to run concurrently.
// Only WithSchema is read from opts.
func MigrateStock(ctx context.Context, pool *pgxpool.Pool, opts ...Option) error {
	if err := Migrate(ctx, pool, opts...); err != nil {
		return err
	}
	cfg := newConfig(opts)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pglock: migrate stock: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int4, $2::int4)", migrateLockA, migrateLockB); err != nil {
		return fmt.Errorf("pglock: migrate stock: %w", err)
	}
	if _, err := tx.Exec(ctx, newStockNames(cfg.schema).expand(stockDDL)); err != nil {
		return fmt.Errorf("pglock: migrate stock: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pglock: migrate stock: %w", err)
	}
	return nil
}

var (
	_ driver.StockBackend = (*Backend)(nil)
	_ driver.OrderStore   = (*OrderStore)(nil)
	_ driver.SupplyCap    = (*OrderStore)(nil)
)

// stockOp runs op, and again after MigrateStock if the tables were missing
// and auto-migration is on; it maps errors to lockx's.
func (b *Backend) stockOp(ctx context.Context, name string, op func(n stockNames) error) error {
	return withStock(ctx, b.pool, b.cfg.schema, b.cfg.autoMigrate, name, op)
}

func withStock(ctx context.Context, pool *pgxpool.Pool, schema string, auto bool, name string, op func(n stockNames) error) error {
	n := newStockNames(schema)
	err := op(n)
	if err != nil && auto && isMissingSchema(err) {
		if merr := MigrateStock(ctx, pool, WithSchema(schema)); merr != nil {
			return driver.Unavailable(name, merr)
		}
		err = op(n)
	}
	switch {
	case err == nil,
		errors.Is(err, driver.ErrStockShort), errors.Is(err, driver.ErrNoStock),
		errors.Is(err, driver.ErrNoStockEntry), errors.Is(err, driver.ErrQuotaExceeded),
		errors.Is(err, driver.ErrDuplicateOrder), errors.Is(err, driver.ErrSupplyExceeded),
		errors.Is(err, driver.ErrInvalidArgument):
		return err
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return err
	}
	return driver.Unavailable(name, err)
}

func (b *Backend) stockArgs(ctx context.Context, sku string, seg int) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	if err := driver.CheckStockArgs(sku, seg); err != nil {
		return err
	}
	return ctx.Err()
}

// InitStock implements driver.StockBackend in one transaction.
func (b *Backend) InitStock(ctx context.Context, sku string, levels []int64) (int, bool, error) {
	if err := b.stockArgs(ctx, sku, len(levels)-1); err != nil {
		return 0, false, err
	}
	for _, l := range levels {
		if l < 0 {
			return 0, false, &driver.ArgError{Arg: "level", Reason: "must not be negative"}
		}
	}
	var segs int
	var created bool
	err := b.stockOp(ctx, "init stock", func(n stockNames) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, n.expand(`INSERT INTO {sku} (sku, segs) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING segs`), sku, len(levels)).Scan(&segs)
			if errors.Is(err, pgx.ErrNoRows) {
				created = false
				return tx.QueryRow(ctx, n.expand(`SELECT segs FROM {sku} WHERE sku = $1`), sku).Scan(&segs)
			}
			if err != nil {
				return err
			}
			created = true
			_, err = tx.Exec(ctx, n.expand(`INSERT INTO {stock} (sku, seg, n, supplied)
				SELECT $1, g.i - 1, g.l, g.l FROM unnest($2::bigint[]) WITH ORDINALITY AS g(l, i)`), sku, levels)
			return err
		})
	})
	if err != nil {
		return 0, false, err
	}
	return segs, created, nil
}

// StockLevels implements driver.StockBackend with one SELECT.
func (b *Backend) StockLevels(ctx context.Context, sku string, segs []int) ([]int64, error) {
	if err := b.stockArgs(ctx, sku, 0); err != nil {
		return nil, err
	}
	ids := make([]int32, len(segs))
	for i, s := range segs {
		if err := driver.CheckStockArgs(sku, s); err != nil {
			return nil, err
		}
		ids[i] = int32(s)
	}
	out := make([]int64, len(segs))
	err := b.stockOp(ctx, "stock levels", func(n stockNames) error {
		rows, err := b.pool.Query(ctx, n.expand(`SELECT seg, n FROM {stock} WHERE sku = $1 AND seg = ANY($2)`), sku, ids)
		if err != nil {
			return err
		}
		got := make(map[int32]int64, len(segs))
		var seg int32
		var lv int64
		if _, err := pgx.ForEachRow(rows, []any{&seg, &lv}, func() error { got[seg] = lv; return nil }); err != nil {
			return err
		}
		for i, s := range ids {
			v, ok := got[s]
			if !ok {
				return driver.ErrNoStock
			}
			out[i] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TakeStock implements driver.StockBackend with one statement: the
// conditional UPDATE of the segment and the INSERT of the ledger entry.
// A refusal costs a second SELECT that reads the level.
func (b *Backend) TakeStock(ctx context.Context, t driver.StockTake) (int64, error) {
	if b.cfg.err != nil {
		return 0, b.cfg.err
	}
	if err := driver.CheckStockTake(t); err != nil {
		return 0, err
	}
	var ttl int64
	if t.TTL > 0 {
		ttl = t.TTL.Milliseconds() + 1
	}
	var level int64
	err := b.stockOp(ctx, "take stock", func(n stockNames) error {
		err := b.pool.QueryRow(ctx, n.expand(`WITH u AS (
				UPDATE {stock} SET n = n - $4
				WHERE sku = $1 AND seg = $2 AND n >= $4 AND ($5::bigint = 0 OR n = $5::bigint)
				  AND NOT EXISTS (SELECT 1 FROM {entry} WHERE sku = $1 AND id = $3)
				RETURNING n),
			i AS (
				INSERT INTO {entry} (sku, id, seg, buyer, qty, deadline)
				SELECT $1, $3, $2, $6, $4,
				       CASE WHEN $7::bigint > 0 THEN clock_timestamp() + $7::bigint * interval '1 millisecond' END
				FROM u)
			SELECT n FROM u`), t.SKU, t.Seg, t.ID, t.Qty, t.Expect, t.User, ttl).Scan(&level)
		var pgErr *pgconn.PgError
		if err == nil || !(errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pgErr) && pgErr.Code == "23505") {
			return err
		}
		// Refused, or the entry exists already (a retry, or a concurrent
		// duplicate that lost the insert): read what is there.
		var dup bool
		err = b.pool.QueryRow(ctx, n.expand(`SELECT s.n, EXISTS (SELECT 1 FROM {entry} WHERE sku = $1 AND id = $3)
			FROM {stock} s WHERE s.sku = $1 AND s.seg = $2`), t.SKU, t.Seg, t.ID).Scan(&level, &dup)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return driver.ErrNoStock
		case err != nil:
			return err
		case !dup:
			return driver.ErrStockShort
		}
		return nil
	})
	return level, err
}

// SettleStock implements driver.StockBackend with one statement.
func (b *Backend) SettleStock(ctx context.Context, sku string, seg int, id string, confirm bool) error {
	if err := b.stockArgs(ctx, sku, seg); err != nil {
		return err
	}
	return b.stockOp(ctx, "settle stock", func(n stockNames) error {
		q := `UPDATE {entry} SET deadline = NULL
			WHERE sku = $1 AND seg = $2 AND id = $3 AND (deadline IS NULL OR deadline > clock_timestamp())`
		if !confirm {
			q = `WITH d AS (DELETE FROM {entry} WHERE sku = $1 AND seg = $2 AND id = $3 RETURNING qty)
				UPDATE {stock} s SET n = s.n + d.qty FROM d WHERE s.sku = $1 AND s.seg = $2`
		}
		tag, err := b.pool.Exec(ctx, n.expand(q), sku, seg, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return driver.ErrNoStockEntry
		}
		return nil
	})
}

// AddStock implements driver.StockBackend with one UPDATE.
func (b *Backend) AddStock(ctx context.Context, sku string, seg int, delta int64) (int64, error) {
	if err := b.stockArgs(ctx, sku, seg); err != nil {
		return 0, err
	}
	var level int64
	err := b.stockOp(ctx, "add stock", func(n stockNames) error {
		err := b.pool.QueryRow(ctx, n.expand(`UPDATE {stock} SET n = n + $3, supplied = supplied + $3
			WHERE sku = $1 AND seg = $2 AND n + $3 >= 0 RETURNING n`), sku, seg, delta).Scan(&level)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		err = b.pool.QueryRow(ctx, n.expand(`SELECT n FROM {stock} WHERE sku = $1 AND seg = $2`), sku, seg).Scan(&level)
		if errors.Is(err, pgx.ErrNoRows) {
			return driver.ErrNoStock
		}
		if err != nil {
			return err
		}
		return driver.ErrStockShort
	})
	return level, err
}

// ExpireStock implements driver.StockBackend with one statement. Rows that a
// concurrent confirmation has locked are skipped: they are decided by it.
func (b *Backend) ExpireStock(ctx context.Context, sku string, seg int, max int) ([]driver.StockEntry, error) {
	if err := b.stockArgs(ctx, sku, seg); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	var out []driver.StockEntry
	err := b.stockOp(ctx, "expire stock", func(n stockNames) error {
		out = out[:0]
		rows, err := b.pool.Query(ctx, n.expand(`WITH d AS (
				DELETE FROM {entry} WHERE sku = $1 AND id IN (
					SELECT id FROM {entry} WHERE sku = $1 AND seg = $2 AND deadline <= clock_timestamp()
					LIMIT $3 FOR UPDATE SKIP LOCKED)
				RETURNING id, buyer, qty, deadline),
			u AS (UPDATE {stock} SET n = n + (SELECT sum(qty) FROM d)
				WHERE sku = $1 AND seg = $2 AND EXISTS (SELECT 1 FROM d))
			SELECT id, buyer, qty, deadline FROM d`), sku, seg, max)
		if err != nil {
			return err
		}
		var e driver.StockEntry
		_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.User, &e.Qty, &e.Deadline}, func() error {
			out = append(out, e)
			return nil
		})
		return err
	})
	return out, err
}

// StockSegment implements driver.StockBackend with one SELECT (one
// snapshot).
func (b *Backend) StockSegment(ctx context.Context, sku string, seg int) (driver.StockSegment, error) {
	if err := b.stockArgs(ctx, sku, seg); err != nil {
		return driver.StockSegment{}, err
	}
	var out driver.StockSegment
	err := b.stockOp(ctx, "stock segment", func(n stockNames) error {
		out = driver.StockSegment{}
		rows, err := b.pool.Query(ctx, n.expand(`SELECT s.n, s.supplied, e.id, e.buyer, e.qty, e.deadline
			FROM {stock} s LEFT JOIN {entry} e ON e.sku = s.sku AND e.seg = s.seg
			WHERE s.sku = $1 AND s.seg = $2 ORDER BY e.id`), sku, seg)
		if err != nil {
			return err
		}
		var (
			id, buyer *string
			qty       *int64
			deadline  *time.Time
			found     bool
		)
		_, err = pgx.ForEachRow(rows, []any{&out.Level, &out.Supplied, &id, &buyer, &qty, &deadline}, func() error {
			found = true
			if id != nil {
				e := driver.StockEntry{ID: *id, User: *buyer, Qty: *qty}
				if deadline != nil {
					e.Deadline = *deadline
				}
				out.Entries = append(out.Entries, e)
			}
			return nil
		})
		if err == nil && !found {
			return driver.ErrNoStock
		}
		return err
	})
	return out, err
}

// ClaimQuota implements driver.StockBackend with one upsert.
func (b *Backend) ClaimQuota(ctx context.Context, sku, user string, delta, limit int64) (int64, error) {
	if err := b.stockArgs(ctx, sku, 0); err != nil {
		return 0, err
	}
	limit = max(limit, 0)
	var count int64
	err := b.stockOp(ctx, "claim quota", func(n stockNames) error {
		var err error
		if delta <= 0 {
			err = b.pool.QueryRow(ctx, n.expand(`UPDATE {quota} SET n = greatest(n + $3, 0)
				WHERE sku = $1 AND buyer = $2 RETURNING n`), sku, user, delta).Scan(&count)
			if errors.Is(err, pgx.ErrNoRows) {
				count, err = 0, nil
			}
			return err
		}
		if limit == 0 || delta <= limit {
			err = b.pool.QueryRow(ctx, n.expand(`INSERT INTO {quota} AS q (sku, buyer, n) VALUES ($1, $2, $3)
				ON CONFLICT (sku, buyer) DO UPDATE SET n = q.n + $3 WHERE $4::bigint = 0 OR q.n + $3 <= $4::bigint
				RETURNING n`), sku, user, delta, limit).Scan(&count)
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		err = b.pool.QueryRow(ctx, n.expand(`SELECT coalesce((SELECT n FROM {quota} WHERE sku = $1 AND buyer = $2), 0)`), sku, user).Scan(&count)
		if err != nil {
			return err
		}
		return driver.ErrQuotaExceeded
	})
	return count, err
}

// OrderStore is a driver.OrderStore in PostgreSQL: durable orders in
// lockx_orders under its primary key (sku, id) and, for orders marked
// Unique, the unique index on (sku, buyer) of live orders — the
// one-order-per-buyer rule that holds even if Redis lost a quota counter in
// a failover. Create it with NewOrderStore; it is safe for concurrent use.
type OrderStore struct {
	pool   *pgxpool.Pool
	schema string
	auto   bool
	err    error
}

// NewOrderStore returns an order store on pool. WithSchema selects the
// schema (default "lockx"); the tables are created on first use unless
// WithoutAutoMigrate is given (then run MigrateStock first).
func NewOrderStore(pool *pgxpool.Pool, opts ...Option) *OrderStore {
	cfg := newConfig(opts)
	if pool == nil && cfg.err == nil {
		cfg.err = fmt.Errorf("pglock: %w", &driver.ArgError{Arg: "pool", Reason: "nil"})
	}
	return &OrderStore{pool: pool, schema: cfg.schema, auto: cfg.autoMigrate, err: cfg.err}
}

func (s *OrderStore) op(ctx context.Context, name string, op func(n stockNames) error) error {
	if s.err != nil {
		return s.err
	}
	return withStock(ctx, s.pool, s.schema, s.auto, name, op)
}

// SaveOrder implements driver.OrderStore with one statement: the INSERT of
// the order and, if it inserted, the UPDATE of the SKU's supply cap
// (driver.SupplyCap), whose CHECK refuses the statement as a whole when the
// live orders would exceed the supply (driver.ErrSupplyExceeded). A unique
// violation of the one-per-buyer index is driver.ErrDuplicateOrder; the same
// order ID again is a no-op. The cap's row is a hot row: concurrent saves of
// one SKU queue on its lock, each for the rest of its transaction.
func (s *OrderStore) SaveOrder(ctx context.Context, o driver.StockOrder) error {
	if err := driver.CheckStockOrder(o); err != nil {
		return err
	}
	return s.op(ctx, "save order", func(n stockNames) error {
		_, err := s.pool.Exec(ctx, n.expand(`WITH i AS (
				INSERT INTO {orders} (sku, id, buyer, qty, uniq) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (sku, id) DO NOTHING RETURNING qty)
			UPDATE {supply} c SET ordered = c.ordered + i.qty FROM i WHERE c.sku = $1`), o.SKU, o.ID, o.User, o.Qty, o.Unique)
		return orderError(err)
	})
}

// orderError maps the order tables' constraint violations to the driver's
// verdicts.
func orderError(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case !errors.As(err, &pgErr):
		return err
	case pgErr.Code == "23505":
		return fmt.Errorf("%w: %s", driver.ErrDuplicateOrder, pgErr.ConstraintName)
	case pgErr.Code == "23514" && pgErr.ConstraintName == "lockx_order_supply_cap":
		return fmt.Errorf("%w: %s", driver.ErrSupplyExceeded, pgErr.ConstraintName)
	}
	return err
}

// CancelOrder implements driver.OrderStore with one statement: the row
// stays, marked cancelled, and a live order's units leave the SKU's cap.
func (s *OrderStore) CancelOrder(ctx context.Context, sku, id string) error {
	return s.op(ctx, "cancel order", func(n stockNames) error {
		_, err := s.pool.Exec(ctx, n.expand(`WITH c AS (
				UPDATE {orders} SET state = 'cancelled' WHERE sku = $1 AND id = $2 AND state = 'live' RETURNING qty)
			UPDATE {supply} s SET ordered = s.ordered - c.qty FROM c WHERE s.sku = $1`), sku, id)
		return err
	})
}

// OrderedUnits implements driver.OrderStore.
func (s *OrderStore) OrderedUnits(ctx context.Context, sku string) (int64, error) {
	var units int64
	err := s.op(ctx, "ordered units", func(n stockNames) error {
		return s.pool.QueryRow(ctx, n.expand(`SELECT coalesce(sum(qty), 0)::bigint FROM {orders} WHERE sku = $1 AND state = 'live'`), sku).Scan(&units)
	})
	return units, err
}

// InitSupply implements driver.SupplyCap. The cap's row counts the live
// orders saved before it: to count them exactly, the transaction that
// creates it holds lockx_orders in SHARE mode, so that no order of any SKU
// commits between the count and the row (a pause of one statement, once
// per SKU).
func (s *OrderStore) InitSupply(ctx context.Context, sku string, supplied int64) (bool, error) {
	if err := driver.CheckStockArgs(sku, 0); err != nil {
		return false, err
	}
	var created bool
	err := s.op(ctx, "init supply", func(n stockNames) error {
		created = false
		var exists bool
		if err := s.pool.QueryRow(ctx, n.expand(`SELECT EXISTS (SELECT 1 FROM {supply} WHERE sku = $1)`), sku).Scan(&exists); err != nil || exists {
			return err
		}
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, n.expand(`LOCK TABLE {orders} IN SHARE MODE`)); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, n.expand(`INSERT INTO {supply} (sku, supplied, ordered)
				SELECT $1, $2, coalesce(sum(qty), 0) FROM {orders} WHERE sku = $1 AND state = 'live'
				ON CONFLICT (sku) DO NOTHING`), sku, supplied)
			created = err == nil && tag.RowsAffected() == 1
			return orderError(err)
		})
	})
	return created, err
}

// AddSupply implements driver.SupplyCap with one UPDATE.
func (s *OrderStore) AddSupply(ctx context.Context, sku string, delta int64) (int64, error) {
	if err := driver.CheckStockArgs(sku, 0); err != nil {
		return 0, err
	}
	var supplied int64
	err := s.op(ctx, "add supply", func(n stockNames) error {
		err := s.pool.QueryRow(ctx, n.expand(`UPDATE {supply} SET supplied = supplied + $2 WHERE sku = $1 RETURNING supplied`), sku, delta).Scan(&supplied)
		if errors.Is(err, pgx.ErrNoRows) {
			return driver.ErrNoStock
		}
		return orderError(err)
	})
	return supplied, err
}

// Supply implements driver.SupplyCap with one SELECT.
func (s *OrderStore) Supply(ctx context.Context, sku string) (supplied, ordered int64, err error) {
	if err := driver.CheckStockArgs(sku, 0); err != nil {
		return 0, 0, err
	}
	err = s.op(ctx, "supply", func(n stockNames) error {
		err := s.pool.QueryRow(ctx, n.expand(`SELECT supplied, ordered FROM {supply} WHERE sku = $1`), sku).Scan(&supplied, &ordered)
		if errors.Is(err, pgx.ErrNoRows) {
			return driver.ErrNoStock
		}
		return err
	})
	return supplied, ordered, err
}
