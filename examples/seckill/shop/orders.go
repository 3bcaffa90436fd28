package shop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/patterns/stock"
)

// Order is what the service tells a buyer and keeps for lookups.
type Order struct {
	ID       string       `json:"id"`
	Sale     string       `json:"sale"`
	SKU      string       `json:"sku"`
	User     string       `json:"user"`
	Qty      int64        `json:"qty"`
	Status   string       `json:"status"` // "paid", "reserved", "expired", "cancelled"
	Deadline time.Time    `json:"deadline,omitzero"`
	Created  time.Time    `json:"created"`
	Stock    *stock.Order `json:"stock"` // where the units came from (for Confirm/Cancel)
}

// Audit sums a sale's orders in the book.
type Audit struct {
	Orders int   `json:"orders"` // paid orders
	Units  int64 `json:"units"`  // units of paid orders
	// DuplicateCharges counts the paid orders beyond the first of one
	// buyer for one SKU: the limit is one per buyer, so it must be 0.
	DuplicateCharges int `json:"duplicate_charges"`
}

// OrderBook keeps the orders for lookup and audit. The units themselves
// are accounted by patterns/stock; this is the service's own record.
type OrderBook interface {
	Put(ctx context.Context, o Order) error
	Get(ctx context.Context, sale, id string) (Order, bool, error)
	Audit(ctx context.Context, sale string) (Audit, error)
}

func audit(orders []Order) Audit {
	var a Audit
	per := map[string]int{}
	for _, o := range orders {
		if o.Status != "paid" {
			continue
		}
		a.Orders++
		a.Units += o.Qty
		k := o.SKU + "\x00" + o.User
		per[k]++
		if per[k] > 1 {
			a.DuplicateCharges++
		}
	}
	return a
}

// memBook is the in-process order book of the embedded default.
type memBook struct {
	mu sync.Mutex
	m  map[string]Order
}

func newMemBook() *memBook { return &memBook{m: map[string]Order{}} }

func (b *memBook) Put(_ context.Context, o Order) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m[o.Sale+"/"+o.ID] = o
	return nil
}

func (b *memBook) Get(_ context.Context, sale, id string) (Order, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.m[sale+"/"+id]
	return o, ok, nil
}

func (b *memBook) Audit(_ context.Context, sale string) (Audit, error) {
	b.mu.Lock()
	var all []Order
	for _, o := range b.m {
		if o.Sale == sale {
			all = append(all, o)
		}
	}
	b.mu.Unlock()
	return audit(all), nil
}

// redisBook keeps orders in one hash per sale.
type redisBook struct{ rdb *redis.Client }

func (b *redisBook) key(sale string) string { return "seckill:{" + sale + "}:orders" }

func (b *redisBook) Put(ctx context.Context, o Order) error {
	v, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return b.rdb.HSet(ctx, b.key(o.Sale), o.ID, v).Err()
}

func (b *redisBook) Get(ctx context.Context, sale, id string) (Order, bool, error) {
	v, err := b.rdb.HGet(ctx, b.key(sale), id).Bytes()
	if errors.Is(err, redis.Nil) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, err
	}
	var o Order
	return o, true, json.Unmarshal(v, &o)
}

func (b *redisBook) Audit(ctx context.Context, sale string) (Audit, error) {
	m, err := b.rdb.HGetAll(ctx, b.key(sale)).Result()
	if err != nil {
		return Audit{}, err
	}
	all := make([]Order, 0, len(m))
	for _, v := range m {
		var o Order
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			return Audit{}, err
		}
		all = append(all, o)
	}
	return audit(all), nil
}

// pgBook keeps orders in a table.
type pgBook struct{ pool *pgxpool.Pool }

func newPGBook(ctx context.Context, pool *pgxpool.Pool) (*pgBook, error) {
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS seckill_orders (
		sale text NOT NULL, id text NOT NULL, sku text NOT NULL, buyer text NOT NULL,
		qty bigint NOT NULL, status text NOT NULL, body jsonb NOT NULL,
		PRIMARY KEY (sale, id))`)
	if err != nil {
		return nil, fmt.Errorf("postgres: order book: %w", err)
	}
	return &pgBook{pool: pool}, nil
}

func (b *pgBook) Put(ctx context.Context, o Order) error {
	v, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, err = b.pool.Exec(ctx, `INSERT INTO seckill_orders (sale, id, sku, buyer, qty, status, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (sale, id) DO UPDATE SET status = EXCLUDED.status, body = EXCLUDED.body`,
		o.Sale, o.ID, o.SKU, o.User, o.Qty, o.Status, v)
	return err
}

func (b *pgBook) Get(ctx context.Context, sale, id string) (Order, bool, error) {
	var v []byte
	err := b.pool.QueryRow(ctx, `SELECT body FROM seckill_orders WHERE sale = $1 AND id = $2`, sale, id).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, err
	}
	var o Order
	return o, true, json.Unmarshal(v, &o)
}

func (b *pgBook) Audit(ctx context.Context, sale string) (Audit, error) {
	var a Audit
	err := b.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(qty), 0),
		coalesce((SELECT sum(n - 1) FROM (SELECT count(*) AS n FROM seckill_orders
			WHERE sale = $1 AND status = 'paid' GROUP BY sku, buyer) g), 0)
		FROM seckill_orders WHERE sale = $1 AND status = 'paid'`, sale).Scan(&a.Orders, &a.Units, &a.DuplicateCharges)
	return a, err
}
