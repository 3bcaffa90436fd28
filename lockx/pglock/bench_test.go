package pglock_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// serverCPU is the CPU time the env's backends have used so far (user +
// system, from /proc/<pid>/stat; the server must run on this machine), and
// whether any backend could be read. Backends of the env are those with its
// application_name; one that ended meanwhile is missed, so a negative
// difference is not reported.
func (e *env) serverCPU(b *testing.B) (time.Duration, bool) {
	rows, err := e.pool.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1", e.schema)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var total time.Duration
	local := false
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // ended, or the server is not on this machine
		}
		local = true
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ = 100
	}
	return total, local
}

// clientCPU is the CPU time this process has used so far.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMark is the CPU used so far by the env's backends and by this process.
type cpuMark struct {
	server, client time.Duration
}

func (e *env) cpuMark(b *testing.B) cpuMark {
	server, _ := e.serverCPU(b)
	return cpuMark{server: server, client: clientCPU()}
}

// reportCPU reports the server and client CPU per operation since start.
// Backends opened during the run (pglock's sessions are) count from zero.
func (e *env) reportCPU(b *testing.B, start cpuMark, ops int) {
	if ops <= 0 {
		return
	}
	if end, local := e.serverCPU(b); local && end > start.server {
		b.ReportMetric(float64((end-start.server).Microseconds())/float64(ops), "server-µs/op")
	}
	b.ReportMetric(float64((clientCPU()-start.client).Microseconds())/float64(ops), "client-µs/op")
}

// Uncontended acquire + release (with fencing token, watchdog off) by 32
// goroutines on distinct keys, against raw pg_try_advisory_lock +
// pg_advisory_unlock pairs, each goroutine on its own pinned pool
// connection, on the same pool; server-µs/op is the CPU the pool's
// backends spent per pair, client-µs/op this process's
// (PGLOCK_BENCH_SESSIONS=1,2,4 compares holder session counts):
//
//	go test -run '^$' -bench Uncontended -benchtime 4s ./lockx/pglock/
func BenchmarkUncontended(b *testing.B) {
	const goroutines = 32
	e := newEnv(b, 2*goroutines+8)
	b.Run("raw", func(b *testing.B) {
		var next atomic.Int64
		b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
		cpu := e.cpuMark(b)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			conn, err := e.pool.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.Release()
			key := next.Add(1) + 1<<40
			var ok bool
			for pb.Next() {
				if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil || !ok {
					b.Errorf("lock: %v %v", ok, err)
					return
				}
				if err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", key).Scan(&ok); err != nil || !ok {
					b.Errorf("unlock: %v %v", ok, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
		e.reportCPU(b, cpu, b.N)
	})
	sessions := []int{pglock.DefaultSessions}
	if s := os.Getenv("PGLOCK_BENCH_SESSIONS"); s != "" {
		sessions = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			sessions = append(sessions, n)
		}
	}
	for _, n := range sessions {
		b.Run(fmt.Sprintf("pglock-sessions=%d", n), func(b *testing.B) { benchUncontended(b, e, n, goroutines) })
	}
}

func benchUncontended(b *testing.B, e *env, sessions, goroutines int) {
	{
		be := pglock.New(e.pool, pglock.WithSchema(e.schema), pglock.WithSessions(sessions))
		c := lockx.New(be)
		defer c.Close()
		if err := be.Connect(context.Background()); err != nil {
			b.Fatal(err)
		}
		if os.Getenv("PGLOCK_BENCH_UNLOGGED_FENCE") != "" { // cost breakdown only: not durable
			if _, err := e.pool.Exec(context.Background(), "ALTER SEQUENCE "+pgx.Identifier{e.schema, "lockx_fence"}.Sanitize()+" SET UNLOGGED"); err != nil {
				b.Fatal(err)
			}
		}
		var next atomic.Int64
		b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
		cpu := e.cpuMark(b)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			key := fmt.Sprintf("bench-%d", next.Add(1))
			for pb.Next() {
				l, err := c.TryAcquire(ctx, key, lockx.WithLease(time.Minute))
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
		e.reportCPU(b, cpu, b.N)
	}
}

// One hot key, 16 independent clients (one goroutine each, each its own
// Backend as separate processes would have): handoffs per second and the
// p99 wait for a handoff, against a raw try-lock loop that sleeps 1 ms
// between tries; server-µs/op and client-µs/op are the server's and this
// process's CPU per acquisition. Three raw rows split the cost: PostgreSQL's
// own queue, the same with a fencing token per grant (the least a lock with
// durable tokens does), and pglock's own handoff statements on pinned
// connections with no Backend or Client around them (the floor of pglock's
// design):
//
//	go test -run '^$' -bench HotKey -benchtime 4s ./lockx/pglock/
func BenchmarkHotKey(b *testing.B) {
	const clients = 16
	e := newEnv(b, 4*clients)
	run := func(b *testing.B, acquire func(i int) (release func())) { handoffRun(b, e, clients, acquire) }
	if err := pglock.Migrate(context.Background(), e.pool, pglock.WithSchema(e.schema)); err != nil {
		b.Fatal(err)
	}
	// pinned runs grant and release on one pinned connection per client,
	// with settings applied first and reset before the connection goes back.
	pinned := func(b *testing.B, settings string, grant, release func(ctx context.Context, c *pgx.Conn, i int) error) {
		ctx := context.Background()
		conns := make([]*pgxpool.Conn, clients)
		for i := range conns {
			c, err := e.pool.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				_, _ = c.Exec(ctx, "RESET ALL")
				c.Release()
			}()
			if settings != "" {
				if _, err := c.Exec(ctx, settings); err != nil {
					b.Fatal(err)
				}
			}
			conns[i] = c
		}
		run(b, func(i int) func() {
			if err := grant(ctx, conns[i].Conn(), i); err != nil {
				b.Error(err)
				return nil
			}
			return func() {
				if err := release(ctx, conns[i].Conn(), i); err != nil {
					b.Error(err)
				}
			}
		})
	}
	const rawKey = 1 << 42
	unlock := func(ctx context.Context, c *pgx.Conn, _ int) error {
		var ok bool
		if err := c.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", rawKey).Scan(&ok); err != nil || !ok {
			return fmt.Errorf("unlock: %v %w", ok, err)
		}
		return nil
	}
	// Shared by the raw rows that use pglock's schema and session settings.
	schema := pgx.Identifier{e.schema}.Sanitize()
	settings := pglock.HandoffFor(e.schema, "hot", nil).Settings
	lockThenToken := `WHEN pg_advisory_lock($1::int8)::text IS NOT NULL THEN nextval('` + schema + `.lockx_fence') END`
	// PostgreSQL's own queue: the fastest a handoff between sessions goes.
	b.Run("raw-blocking", func(b *testing.B) {
		pinned(b, "", func(ctx context.Context, c *pgx.Conn, _ int) error {
			_, err := c.Exec(ctx, "SELECT pg_advisory_lock($1)", rawKey)
			return err
		}, unlock)
	})
	// The least a lock with durable fencing tokens does: the blocking grant
	// draws the token in the same statement, with pglock's session settings
	// (asynchronous commit, generic plans).
	b.Run("raw-blocking-token", func(b *testing.B) {
		pinned(b, settings, func(ctx context.Context, c *pgx.Conn, _ int) error {
			var token int64
			return c.QueryRow(ctx, "SELECT CASE "+lockThenToken, rawKey).Scan(&token)
		}, unlock)
	})
	// pglock's own handoff statements on raw connections, without the
	// Backend or the Client: the blocking grant with the fair-queue check,
	// the wait slice, the token and the holder's row, and the release with
	// its wait-flag test. The floor of pglock's design; the pglock rows add
	// the client's work to it.
	b.Run("raw-pglock-statements", func(b *testing.B) {
		hs := make([]pglock.Handoff, clients)
		for i := range hs {
			hs[i] = pglock.HandoffFor(e.schema, "hot", []byte(lockx.NewOwner()))
		}
		pinned(b, settings, func(ctx context.Context, c *pgx.Conn, i int) error {
			var token, ttl, collision *int64
			if err := c.QueryRow(ctx, hs[i].Grant, hs[i].GrantArgs...).Scan(&token, &ttl, &collision); err != nil {
				return err
			}
			if token == nil {
				return fmt.Errorf("grant refused (ttl %v)", ttl)
			}
			return nil
		}, func(ctx context.Context, c *pgx.Conn, i int) error {
			// 1: released, and a notification sent because the wait flag
			// was taken — by a previous release whose transaction had
			// not ended yet, as in pglock.
			var r int64
			if err := c.QueryRow(ctx, hs[i].Release, hs[i].ReleaseArgs...).Scan(&r); err != nil || r < 0 {
				return fmt.Errorf("release: %d %w", r, err)
			}
			return nil
		})
	})
	// TxLock: the lock in the caller's transaction, released by its commit
	// (BEGIN, TxLock, COMMIT, with the server's default synchronous commit;
	// a real transaction would write between the last two).
	b.Run("pglock-TxLock", func(b *testing.B) {
		txs := make([]pgx.Tx, clients)
		pinned(b, "", func(ctx context.Context, c *pgx.Conn, i int) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := pglock.TxLock(ctx, tx, "hot", pglock.WithSchema(e.schema)); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
			txs[i] = tx
			return nil
		}, func(ctx context.Context, _ *pgx.Conn, i int) error {
			return txs[i].Commit(ctx)
		})
	})
	// PGLOCK_BENCH_PARTS=1 adds the handoff statements' parts one by one
	// on top of the token row, up to everything but the holder's row:
	// where pglock's server CPU per handoff goes.
	if os.Getenv("PGLOCK_BENCH_PARTS") != "" {
		queued := `EXISTS (SELECT 1 FROM ` + schema + `.lockx_queue WHERE hash = $1::int8 AND expires > clock_timestamp())`
		slice := `set_config('lock_timeout', '200ms', true) IS NULL`
		lockSliceToken := `WHEN pg_advisory_lock($1::int8)::text IS NOT NULL AND set_config('lock_timeout', '0', true) IS NOT NULL THEN nextval('` + schema + `.lockx_fence') END`
		all := `SELECT CASE WHEN ` + queued + ` THEN NULL WHEN ` + slice + ` THEN NULL ` + lockSliceToken
		cte := `WITH g AS MATERIALIZED (` + all + ` AS token)
SELECT g.token, CASE WHEN g.token IS NULL THEN (SELECT 0::int8 FROM ` + schema + `.lockx_held h WHERE h.hash = $1::int8) END FROM g`
		flagRelease := `SELECT CASE WHEN NOT pg_advisory_unlock($1::int8) THEN -1
	WHEN pg_try_advisory_xact_lock(12345::int4, 678::int4) THEN 0
	ELSE 1 + length(pg_notify('lockx_bench', 'x')::text) END::int8`
		grant := func(q string) func(ctx context.Context, c *pgx.Conn, _ int) error {
			return func(ctx context.Context, c *pgx.Conn, _ int) error {
				rows, err := c.Query(ctx, q, rawKey)
				if err != nil {
					return err
				}
				rows.Close()
				return rows.Err()
			}
		}
		release := func(ctx context.Context, c *pgx.Conn, _ int) error {
			_, err := c.Exec(ctx, flagRelease, rawKey)
			return err
		}
		for _, part := range []struct{ name, grant string }{
			{"slice", `SELECT CASE WHEN ` + slice + ` THEN NULL ` + lockSliceToken},
			{"fair-check", `SELECT CASE WHEN ` + queued + ` THEN NULL ` + lockThenToken},
			{"slice+fair-check", all},
			{"slice+fair-check+cte", cte},
		} {
			b.Run("raw-token+"+part.name, func(b *testing.B) { pinned(b, settings, grant(part.grant), unlock) })
		}
		b.Run("raw-token+slice+fair-check+cte+flag", func(b *testing.B) { pinned(b, settings, grant(cte), release) })
	}
	b.Run("raw-trylock-sleep1ms", func(b *testing.B) {
		pinned(b, "", func(ctx context.Context, c *pgx.Conn, _ int) error {
			for {
				var ok bool
				if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", rawKey).Scan(&ok); err != nil || ok {
					return err
				}
				time.Sleep(time.Millisecond)
			}
		}, unlock)
	})
	for _, fair := range []bool{false, true} {
		b.Run(fmt.Sprintf("pglock-fair=%v", fair), func(b *testing.B) {
			cs := make([]*lockx.Client, clients)
			for i := range cs {
				be := pglock.New(e.pool, pglock.WithSchema(e.schema), pglock.WithSessions(1))
				if err := be.Connect(context.Background()); err != nil {
					b.Fatal(err)
				}
				cs[i] = lockx.New(be)
				defer cs[i].Close()
			}
			opts := []lockx.Option{lockx.WithLease(time.Minute)}
			if fair {
				opts = append(opts, lockx.Fair())
			}
			b.ResetTimer()
			run(b, func(i int) func() {
				l, err := cs[i].Acquire(context.Background(), "hot", opts...)
				if err != nil {
					b.Error(err)
					return nil
				}
				return func() { _ = l.Release(context.Background()) }
			})
		})
	}
}

// handoffRun runs b.N grants of one key among clients goroutines: acquire
// grants goroutine i the key and returns its release (nil: stop). It
// reports the handoffs per second (grants to another goroutine than the
// one granted last), the CPU per grant and the handed-to goroutines' wait.
func handoffRun(b *testing.B, e *env, clients int, acquire func(i int) (release func())) {
	var mu sync.Mutex
	last := -1
	var handoffs int
	var waits []time.Duration
	var n atomic.Int64
	var wg sync.WaitGroup
	cpu := e.cpuMark(b)
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n.Add(1) <= int64(b.N) {
				t0 := time.Now()
				release := acquire(i)
				if release == nil {
					return
				}
				mu.Lock()
				if last != i {
					handoffs++
					waits = append(waits, time.Since(t0))
				}
				last = i
				mu.Unlock()
				release()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(waits)
	b.ReportMetric(float64(handoffs)/el.Seconds(), "handoffs/s")
	e.reportCPU(b, cpu, b.N)
	if len(waits) > 0 {
		b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99-ms")
	}
}
