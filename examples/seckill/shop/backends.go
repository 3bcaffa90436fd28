package shop

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/miniclock"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// Backends is what every replica of the service shares: where locks,
// stock, fences, idempotency outcomes and orders live.
type Backends struct {
	// Describe says which backend serves what, for the startup banner.
	Describe []string

	newLocks func() (driver.Backend, error) // one per replica (its own connections)
	fences   func(driver.Backend) driver.FenceStore
	results  func(driver.Backend) driver.ResultStore
	orders   driver.OrderStore // nil: stock without WithOrders
	book     OrderBook
	closers  []func()
	once     sync.Once

	mu   sync.Mutex
	rdbs []*redis.Client // the replicas' clients: redislock does not close them
}

func (b *Backends) redis(opt *redis.Options) *redis.Client {
	c := redis.NewClient(opt)
	b.mu.Lock()
	b.rdbs = append(b.rdbs, c)
	b.mu.Unlock()
	return c
}

// Close stops the embedded servers and connection pools.
func (b *Backends) Close() {
	b.once.Do(func() {
		for i := len(b.closers) - 1; i >= 0; i-- {
			b.closers[i]()
		}
	})
}

// Open returns the backends named by the URLs: redisURL ("" for none),
// postgresURL ("" for none). With neither, it starts an embedded miniredis
// (so redislock's real scripts serve the stock) and keeps orders in-process.
func Open(ctx context.Context, redisURL, postgresURL string) (*Backends, error) {
	b := &Backends{}
	var pool *pgxpool.Pool
	if postgresURL != "" {
		pc, err := pgxpool.ParseConfig(postgresURL)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if pc.MaxConns < 32 {
			pc.MaxConns = 32 // pglock's holder sessions + stock, fences, results, orders
		}
		p, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if err := p.Ping(ctx); err != nil {
			p.Close()
			return nil, fmt.Errorf("postgres: %w", err)
		}
		pool = p
		b.closers = append(b.closers, p.Close)
		book, err := newPGBook(ctx, pool)
		if err != nil {
			b.Close()
			return nil, err
		}
		b.book = book
		b.orders = pglock.NewOrderStore(pool)
	}
	switch {
	case redisURL != "":
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("redis: %w", err)
		}
		probe := redis.NewClient(opt)
		err = probe.Ping(ctx).Err()
		_ = probe.Close()
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("redis: %w", err)
		}
		b.newLocks = func() (driver.Backend, error) {
			return redislock.New(b.redis(opt)), nil
		}
		b.fences = func(l driver.Backend) driver.FenceStore { return l.(*redislock.Backend) }
		b.results = func(l driver.Backend) driver.ResultStore { return l.(*redislock.Backend) }
		b.Describe = append(b.Describe, "locks, stock, fences, idempotency: Redis "+redact(redisURL))
		if b.book == nil {
			b.book = &redisBook{rdb: b.redis(opt)}
			b.Describe = append(b.Describe, "orders: Redis hash (no PostgreSQL given)")
		}
	case pool != nil:
		b.newLocks = func() (driver.Backend, error) { return pglock.New(pool), nil }
		b.fences = func(driver.Backend) driver.FenceStore { return pglock.NewFenceStore(pool) }
		b.results = func(driver.Backend) driver.ResultStore { return pglock.NewResultStore(pool) }
		b.Describe = append(b.Describe, "locks, stock, fences, idempotency: PostgreSQL "+redact(postgresURL))
	default:
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, fmt.Errorf("miniredis: %w", err)
		}
		b.closers = append(b.closers, mr.Close, miniclock.Follow(mr))
		opt := &redis.Options{Addr: mr.Addr()}
		b.newLocks = func() (driver.Backend, error) { return redislock.New(b.redis(opt)), nil }
		b.fences = func(l driver.Backend) driver.FenceStore { return l.(*redislock.Backend) }
		b.results = func(l driver.Backend) driver.ResultStore { return l.(*redislock.Backend) }
		b.Describe = append(b.Describe,
			"locks, stock, fences, idempotency: embedded miniredis at "+mr.Addr()+" (redislock's real Lua scripts)")
	}
	if pool != nil {
		b.Describe = append(b.Describe, "orders: PostgreSQL "+redact(postgresURL)+" (pglock.OrderStore, UNIQUE (sku, buyer))")
	} else if b.book == nil {
		b.book = newMemBook()
		b.orders = memlock.NewOrderStore()
		b.Describe = append(b.Describe, "orders: in-process store (memlock.OrderStore)")
	}
	b.closers = append(b.closers, func() { // runs first
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.rdbs {
			_ = c.Close()
		}
	})
	return b, nil
}

// redact hides a URL's password.
func redact(u string) string {
	if at := strings.LastIndex(u, "@"); at > 0 {
		if i := strings.Index(u, "://"); i >= 0 && i+3 < at {
			cred := u[i+3 : at]
			if c := strings.Index(cred, ":"); c >= 0 {
				return u[:i+3] + cred[:c] + ":***" + u[at:]
			}
		}
	}
	return u
}
