package pglock_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

// stmtCounter is a pgx tracer counting the statements sent and the round
// trips they took (a batch is one round trip).
type stmtCounter struct {
	stmts, trips atomic.Int64
}

func (s *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.stmts.Add(1)
	s.trips.Add(1)
	return ctx
}

func (s *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.trips.Add(1)
	return ctx
}

func (s *stmtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	s.stmts.Add(1)
}

func (s *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// The semaphore workload of lockxbench's issue 5 row on one Backend: 64
// goroutines take one permit of an N = 8 semaphore (or the plain lock) and
// give it back at once. Besides handoffs/s and the CPU per grant it reports
// the statements and round trips per grant (counted by a pgx tracer):
//
//	go test -run '^$' -bench Semaphore -benchtime 3s ./lockx/pglock/
func BenchmarkSemaphore(b *testing.B) {
	const goroutines, permits = 64, 8
	e := newEnv(b, 4)
	cfg, err := pgxpool.ParseConfig(e.dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 24
	cfg.ConnConfig.RuntimeParams["application_name"] = e.schema
	counter := &stmtCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	run := func(b *testing.B, acquire func(ctx context.Context) (release func(context.Context) error, err error)) {
		ctx := context.Background()
		stmts, trips := counter.stmts.Load(), counter.trips.Load()
		b.ResetTimer()
		handoffRun(b, e, goroutines, func(int) func() {
			release, err := acquire(ctx)
			if err != nil {
				b.Error(err)
				return nil
			}
			return func() {
				if err := release(ctx); err != nil {
					b.Error(err)
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(counter.stmts.Load()-stmts)/float64(b.N), "stmts/op")
		b.ReportMetric(float64(counter.trips.Load()-trips)/float64(b.N), "trips/op")
	}
	client := func(b *testing.B) *lockx.Client {
		be := pglock.New(pool, pglock.WithSchema(e.schema))
		if err := be.Connect(context.Background()); err != nil {
			b.Fatal(err)
		}
		c := lockx.New(be)
		b.Cleanup(func() { _ = c.Close() })
		return c
	}
	b.Run("plain-lock", func(b *testing.B) {
		c := client(b)
		run(b, func(ctx context.Context) (func(context.Context) error, error) {
			l, err := c.Acquire(ctx, "plain")
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		})
	})
	b.Run("semaphore", func(b *testing.B) {
		sem := semaphore.New(client(b), "sem", permits)
		run(b, func(ctx context.Context) (func(context.Context) error, error) {
			p, err := sem.Acquire(ctx)
			if err != nil {
				return nil, err
			}
			return p.Release, nil
		})
	})
}
