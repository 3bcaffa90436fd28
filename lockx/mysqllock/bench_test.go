package mysqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/mysqllock"
)

// The benchmarks compare both modes with the naive table lock that many
// MySQL lock write-ups show (INSERT … ON DUPLICATE KEY UPDATE expire_time = IF(expired, new,
// old), DELETE to release; no owner check, no token, no renewal):
//
//	go test -run '^$' -bench . -benchtime 2s ./lockx/mysqllock/
//
// Uncontended: 16 goroutines, each on its own key, acquire + release
// (session mode with the default 4 pinned sessions and with 16).
// HotKey: 8 goroutines, each with its own Client (so every grant goes
// through MySQL), contend for one key; the metric is grants per second
// (a releaser may win the key again, as in the naive loop).
// lockx runs with an explicit lease (no watchdog) and fencing tokens. The
// DSN has interpolateParams=true (one round trip per statement instead of
// prepare + execute), for all three.

const (
	benchUncontended = 16
	benchHot         = 8
)

type naive struct {
	db    *sql.DB
	table string
}

func newNaive(b *testing.B, db *sql.DB, prefix string) *naive {
	n := &naive{db: db, table: "`" + prefix + "distributed_lock`"}
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS " + n.table + " (lock_key VARCHAR(64) NOT NULL PRIMARY KEY, expire_time DATETIME NOT NULL) ENGINE=InnoDB"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + n.table) })
	return n
}

func (n *naive) try(ctx context.Context, key string) (bool, error) {
	// The common naive table lock, with a bind parameter. 1 row affected:
	// inserted; 2: an expired row taken over; 0: held.
	res, err := n.db.ExecContext(ctx, "INSERT INTO "+n.table+" (lock_key, expire_time) VALUES (?, NOW() + INTERVAL 30 SECOND)"+
		" ON DUPLICATE KEY UPDATE expire_time = IF(expire_time < NOW(), VALUES(expire_time), expire_time)", key)
	if err != nil {
		return false, err
	}
	a, _ := res.RowsAffected()
	return a > 0, nil
}

func (n *naive) release(ctx context.Context, key string) error {
	_, err := n.db.ExecContext(ctx, "DELETE FROM "+n.table+" WHERE lock_key = ?", key)
	return err
}

func benchDB(b *testing.B) (*sql.DB, string) {
	db, prefix := openDB(b)
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	if err := mysqllock.Migrate(context.Background(), db, mysqllock.WithTablePrefix(prefix)); err != nil {
		b.Fatal(err)
	}
	return db, prefix
}

func clients(db *sql.DB, prefix string) map[string]func() *lockx.Client {
	return map[string]func() *lockx.Client{
		"session": func() *lockx.Client { return lockx.New(mysqllock.New(db, mysqllock.WithTablePrefix(prefix))) },
		"session-16": func() *lockx.Client {
			return lockx.New(mysqllock.New(db, mysqllock.WithTablePrefix(prefix), mysqllock.WithSessions(16)))
		},
		"table": func() *lockx.Client { return lockx.New(mysqllock.NewTable(db, mysqllock.WithTablePrefix(prefix))) },
	}
}

func BenchmarkUncontended(b *testing.B) {
	db, prefix := benchDB(b)
	b.Run("naive-table", func(b *testing.B) {
		n := newNaive(b, db, prefix)
		var next atomic.Int64
		b.SetParallelism(max(1, benchUncontended/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			key := fmt.Sprintf("u%d", next.Add(1))
			for pb.Next() {
				ok, err := n.try(ctx, key)
				if err != nil || !ok {
					b.Errorf("naive try: %v %v", ok, err)
					return
				}
				if err := n.release(ctx, key); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	})
	cs := clients(db, prefix)
	for _, mode := range []string{"session", "session-16", "table"} {
		b.Run("mysqllock-"+mode, func(b *testing.B) {
			c := cs[mode]()
			defer c.Close()
			var next atomic.Int64
			b.SetParallelism(max(1, benchUncontended/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				key := fmt.Sprintf("u:%s:%d", mode, next.Add(1))
				for pb.Next() {
					l, err := c.TryAcquire(ctx, key, lockx.WithLease(10*time.Second))
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
		})
	}
}

func BenchmarkHotKey(b *testing.B) {
	db, prefix := benchDB(b)
	run := func(b *testing.B, once func(ctx context.Context) error) {
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(int64(b.N))
		b.ResetTimer()
		for g := 0; g < benchHot; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for left.Add(-1) >= 0 {
					if err := once(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "handoffs/s")
	}
	b.Run("naive-table", func(b *testing.B) {
		n := newNaive(b, db, prefix)
		run(b, func(ctx context.Context) error {
			for { // the seed has no waiting: retry every millisecond
				ok, err := n.try(ctx, "hot")
				if err != nil {
					return err
				}
				if ok {
					return n.release(ctx, "hot")
				}
				time.Sleep(time.Millisecond)
			}
		})
	})
	cs := clients(db, prefix)
	for _, mode := range []string{"session", "table"} {
		b.Run("mysqllock-"+mode, func(b *testing.B) {
			// One Client per goroutine: handoffs go through MySQL, not
			// through a Client's local queue.
			var mu sync.Mutex
			var all []*lockx.Client
			get := func() *lockx.Client {
				mu.Lock()
				defer mu.Unlock()
				c := cs[mode]()
				all = append(all, c)
				return c
			}
			pool := sync.Pool{New: func() any { return get() }}
			defer func() {
				for _, c := range all {
					_ = c.Close()
				}
			}()
			key := "hot:" + mode
			run(b, func(ctx context.Context) error {
				c := pool.Get().(*lockx.Client)
				defer pool.Put(c)
				l, err := c.Acquire(ctx, key, lockx.WithLease(10*time.Second))
				if err != nil {
					return err
				}
				return l.Release(ctx)
			})
		})
	}
}
