package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx/etcdlock/etcdtest"
)

// PoolSize is the go-redis pool size of a client shared by many goroutines,
// as in the peer measurements of docs/benchmarks.md.
const PoolSize = 64

// Env is what the cases run against: the benchmark's redis-servers
// (started on demand, the first is the main one) and the local PostgreSQL.
type Env struct {
	PGURL string

	rtts rttCounter // round trips of every client the cases open

	mu      sync.Mutex
	servers []*RedisServer
	admin   []*redis.Client
	zk      *ZKServer         // started by the first ZooKeeper case
	etcd    *etcdtest.Cluster // started by the first etcd case
	pgSeen  bool              // PostgreSQL answered once: later failures are transient
	pgDown  error             // PostgreSQL never answered: the rows are skipped
}

// NewEnv returns an Env; servers start when a case first needs them.
func NewEnv(pgURL string) *Env { return &Env{PGURL: pgURL} }

// Servers returns the addresses of n redis-servers, starting any that are
// missing.
func (e *Env) Servers(ctx context.Context, n int) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.servers) < n {
		s, err := StartRedis(ctx)
		if err != nil {
			return nil, err
		}
		e.servers = append(e.servers, s)
		e.admin = append(e.admin, redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 2}))
	}
	addrs := make([]string, n)
	for i := range n {
		addrs[i] = e.servers[i].Addr
	}
	return addrs, nil
}

// Addr returns the main server's address.
func (e *Env) Addr(ctx context.Context) (string, error) {
	a, err := e.Servers(ctx, 1)
	if err != nil {
		return "", err
	}
	return a[0], nil
}

// Admin returns a small client on server i for INFO, FLUSHALL and the like.
func (e *Env) Admin(i int) *redis.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.admin[i]
}

// Client returns a new go-redis client on the main server with the given
// pool size (0: go-redis's default, as an independent process would have).
func (e *Env) Client(ctx context.Context, poolSize int) (*redis.Client, error) {
	addr, err := e.Addr(ctx)
	if err != nil {
		return nil, err
	}
	return e.clientOn(addr, poolSize), nil
}

// clientOn returns a new go-redis client on addr whose round trips are
// counted.
func (e *Env) clientOn(addr string, poolSize int) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize})
	rdb.AddHook(&e.rtts)
	return rdb
}

// rttCounter is a go-redis hook counting round trips: one per command sent
// alone, one per pipeline (or MULTI/EXEC transaction) however long. Pub/sub
// traffic does not pass through these hooks and is not counted.
type rttCounter struct{ n atomic.Int64 }

func (c *rttCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *rttCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *rttCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// Reset empties every started server and resets its statistics, so each
// case starts from the same state. On PostgreSQL, once it has answered, it
// vacuums the tables of pglock's default schema: this machine's server runs
// with autovacuum off, and without it every case would inherit the dead
// rows of the ones before it (a production server's autovacuum does this
// work between bursts).
func (e *Env) Reset(ctx context.Context) error {
	e.mu.Lock()
	admin := append([]*redis.Client(nil), e.admin...)
	seen := e.pgSeen
	e.mu.Unlock()
	var errs []error
	for _, a := range admin {
		errs = append(errs, a.FlushAll(ctx).Err(), a.ConfigResetStat(ctx).Err())
	}
	if seen {
		errs = append(errs, e.vacuumPG(ctx))
	}
	return errors.Join(errs...)
}

// vacuumPG vacuums every table of the lockx schema.
func (e *Env) vacuumPG(ctx context.Context) error {
	pool, err := e.PG(ctx, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, "select format('%I.%I', schemaname, tablename) from pg_tables where schemaname = 'lockx'")
	if err != nil {
		return fmt.Errorf("bench: list lockx tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("bench: list lockx tables: %w", err)
	}
	for _, t := range tables {
		if _, err := pool.Exec(ctx, "vacuum "+t); err != nil {
			return fmt.Errorf("bench: vacuum %s: %w", t, err)
		}
	}
	return nil
}

// PG returns a pool on the local PostgreSQL with room for conns
// connections (conns ≤ 0: pgxpool's default MaxConns, what a user who
// does not size the pool gets). A failure is retried for 15 s (on a shared machine the
// server is at times out of connections). If PostgreSQL has never answered,
// the error matches errSkip and later calls fail at once: the PostgreSQL
// rows are skipped. Once it has answered, a failure is reported for the
// case and run at hand only.
func (e *Env) PG(ctx context.Context, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(e.PGURL)
	if err != nil {
		return nil, fmt.Errorf("%w: -pg: %w", errSkip, err)
	}
	if conns > 0 {
		cfg.MaxConns = int32(conns)
	}
	e.mu.Lock()
	seen, down := e.pgSeen, e.pgDown
	e.mu.Unlock()
	if down != nil {
		return nil, down
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		pool, err := e.pgTry(ctx, cfg)
		if err == nil {
			e.mu.Lock()
			e.pgSeen = true
			e.mu.Unlock()
			return pool, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			err = fmt.Errorf("bench: PostgreSQL at %s: %w", e.PGURL, err)
			if !seen {
				err = fmt.Errorf("%w: %w", errSkip, err)
				e.mu.Lock()
				e.pgDown = err
				e.mu.Unlock()
			}
			return nil, err
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

func (e *Env) pgTry(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(pctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Close stops every server the Env started.
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.admin {
		a.Close()
	}
	for _, s := range e.servers {
		s.Stop()
	}
	e.zk.Stop()
	if e.etcd != nil {
		e.etcd.Close()
	}
	e.servers, e.admin, e.zk, e.etcd = nil, nil, nil, nil
}

// cmdProbe counts, in the window, the commands the Redis servers under test
// executed (INFO commandstats, which includes the commands scripts call;
// INFO and CONFIG, the probe's own, are excluded) and the round trips of
// the clients under test, and divides both by the operations counted. It
// watches the main server, or the first n servers (cmdProbeOn).
type cmdProbe struct {
	e         *Env
	n         int
	before    int64
	ok        bool
	rttBefore int64
}

func (e *Env) cmdProbe() *cmdProbe { return e.cmdProbeOn(1) }

// cmdProbeOn counts the commands of the first n servers, summed.
func (e *Env) cmdProbeOn(n int) *cmdProbe { return &cmdProbe{e: e, n: n} }

// sumServers sums f over the first n servers; false if any failed.
func (e *Env) sumServers(ctx context.Context, n int, f func(ctx context.Context, rdb *redis.Client) (float64, error)) (float64, bool) {
	var t float64
	for i := range n {
		v, err := f(ctx, e.Admin(i))
		if err != nil {
			return 0, false
		}
		t += v
	}
	return t, true
}

// ownCalls is a server's command count less the probe's own commands.
func ownCalls(ctx context.Context, rdb *redis.Client) (float64, error) {
	m, err := commandCalls(ctx, rdb)
	var n int64
	for k, v := range m {
		if k != "info" && k != "config|resetstat" && k != "config" {
			n += v
		}
	}
	return float64(n), err
}

// calls sums the servers' command counts, less the probe's own commands.
func (p *cmdProbe) calls(ctx context.Context) (int64, bool) {
	n, ok := p.e.sumServers(ctx, p.n, ownCalls)
	return int64(n), ok
}

func (p *cmdProbe) begin(ctx context.Context) {
	p.before, p.ok = p.calls(ctx)
	p.rttBefore = p.e.rtts.n.Load()
}

func (p *cmdProbe) end(ctx context.Context, s Sample, window time.Duration) {
	rtts := p.e.rtts.n.Load() - p.rttBefore
	after, ok := p.calls(ctx)
	if !ok || !p.ok {
		return
	}
	n := after - p.before
	s["cmds/s"] = float64(n) / window.Seconds()
	s["rtt/s"] = float64(rtts) / window.Seconds()
	if ops := s[mRate] * window.Seconds(); ops > 0 {
		s[mCmds] = float64(n) / ops
		s[mRTT] = float64(rtts) / ops
	}
}

// cpuProbe measures this process's CPU (getrusage) and the Redis server's
// (INFO cpu) during the window, in percent of one core.
type cpuProbe struct {
	rdb       *redis.Client
	self, srv float64
}

func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func (p *cpuProbe) begin(ctx context.Context) {
	p.self = processCPU()
	p.srv, _ = serverCPU(ctx, p.rdb)
}

func (p *cpuProbe) end(ctx context.Context, s Sample, window time.Duration) {
	s["client cpu%"] = 100 * (processCPU() - p.self) / window.Seconds()
	if srv, err := serverCPU(ctx, p.rdb); err == nil {
		s["redis cpu%"] = 100 * (srv - p.srv) / window.Seconds()
	}
}
