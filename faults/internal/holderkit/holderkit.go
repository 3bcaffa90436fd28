// Package holderkit is the lock holder the fault tests run as a separate
// OS process, so that it can be paused (SIGSTOP/SIGCONT) and killed: Main
// is the whole program, faults/internal/holder builds it with the root
// module's backends, and faults/etcd adds etcdlock (a module of its own,
// which the root module does not import). It reads
// commands on stdin, one per line, and writes one JSON event per line on
// stdout, timestamped with CLOCK_MONOTONIC (faults.Now):
//
//	acquire <wait ms>  take the lock (watchdog lease -lease)
//	check              report whether the lock is still believed held
//	write              read-modify-write both registers with the lock's token:
//	                   the fenced one through pglock.FencedExec, the plain one
//	                   with an unguarded UPDATE
//	release            release the lock
//	quit               exit
//
// A "lost" event is written when the lock's Lost channel closes, a "renew"
// event for every lease renewal (its call time and whether it succeeded).
//
// -broken deliberately breaks the lock, for the suite's sensitivity runs:
// "short" grants and renews half the lease asked for while reporting the
// full one (a lease that ends early), "ignore" takes a different key on
// the same server (a lock that ignores its holder).
package holderkit

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/faults"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/mysqllock"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/lockx/zklock"
)

// Event is one line of the holder's output.
type Event struct {
	Ev      string `json:"ev"` // lock, op, check, lost, error
	Client  int    `json:"client"`
	Release bool   `json:"release,omitempty"`
	Reg     string `json:"reg,omitempty"` // fenced or plain
	Write   bool   `json:"write,omitempty"`
	Val     int64  `json:"val,omitempty"`
	Token   uint64 `json:"token,omitempty"`
	OK      bool   `json:"ok,omitempty"`
	Unknown bool   `json:"unknown,omitempty"`
	Held    bool   `json:"held,omitempty"`
	Call    int64  `json:"call,omitempty"`
	Ret     int64  `json:"ret,omitempty"`
	Err     string `json:"err,omitempty"`
}

var (
	outMu sync.Mutex
	enc   = json.NewEncoder(os.Stdout)
)

func emit(e Event) {
	outMu.Lock()
	defer outMu.Unlock()
	_ = enc.Encode(e)
}

// Backends opens the backends a holder binary adds by name (-backend):
// each is given the -addr flag and returns the backend and what to close
// after it at exit.
type Backends map[string]func(ctx context.Context, addr string) (driver.Backend, func(), error)

// Main runs the holder: the built-in backends and extra, chosen by -backend.
func Main(extra Backends) {
	var (
		backend   = flag.String("backend", "redis", "redis, sentinel, cluster, quorum (Redlock), pg, zk, mysql (session locks), mysqltable (lease table), or one the binary adds")
		mysqlDSN  = flag.String("mysql", "", "go-sql-driver DSN for mysqllock (mysql, mysqltable)")
		addr      = flag.String("addr", "", "Redis address (redis), or sentinel (sentinel) or node (cluster, quorum) addresses, comma-separated")
		master    = flag.String("master", "", "Sentinel master name")
		lockURL   = flag.String("lockpg", "", "PostgreSQL URL for pglock (pg)")
		regURL    = flag.String("regpg", "", "PostgreSQL URL of the registers")
		key       = flag.String("key", "", "lock key")
		fenced    = flag.String("fenced", "", "id of the fenced register (also its fence resource)")
		plain     = flag.String("plain", "", "id of the unfenced register")
		id        = flag.Int("id", 0, "client id")
		lease     = flag.Duration("lease", time.Second, "watchdog lease")
		rto       = flag.Duration("rto", 500*time.Millisecond, "Redis read/write timeout")
		ack       = flag.Int("ack", 0, "redislock.WithReplicaAck replicas (0: off)")
		healthInt = flag.Duration("health", 250*time.Millisecond, "pglock health interval")
		zkSession = flag.Duration("zksession", time.Second, "ZooKeeper session timeout (zk)")
		broken    = flag.String("broken", "", `break the lock: "short" (half leases) or "ignore" (another key)`)
	)
	flag.Parse()
	ctx := context.Background()
	fail := func(err error) {
		emit(Event{Ev: "error", Client: *id, Err: err.Error()})
		os.Exit(2)
	}

	var b driver.Backend
	var closers []func()
	switch *backend {
	case "redis", "sentinel", "cluster":
		var rdb redis.UniversalClient
		switch *backend {
		case "redis":
			rdb = redis.NewClient(&redis.Options{Addr: *addr, ReadTimeout: *rto, WriteTimeout: *rto, DialTimeout: *rto, MaxRetries: 1})
		case "cluster":
			rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(*addr, ","),
				ReadTimeout: *rto, WriteTimeout: *rto, DialTimeout: *rto, MaxRetries: 3})
		default:
			rdb = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: *master, SentinelAddrs: strings.Split(*addr, ","),
				ReadTimeout: *rto, WriteTimeout: *rto, DialTimeout: *rto, MaxRetries: 1})
		}
		var opts []redislock.Option
		if *ack > 0 {
			opts = append(opts, redislock.WithReplicaAck(*ack, *rto/2))
		}
		b = redislock.New(rdb, opts...)
		closers = append(closers, func() { rdb.Close() })
	case "quorum":
		var clients []redis.UniversalClient
		for _, a := range strings.Split(*addr, ",") {
			c := redis.NewClient(&redis.Options{Addr: a, ReadTimeout: *rto, WriteTimeout: *rto, DialTimeout: *rto, MaxRetries: -1})
			clients = append(clients, c)
			closers = append(closers, func() { c.Close() })
		}
		b = redislock.NewQuorum(clients, redislock.WithNodeTimeout(200*time.Millisecond))
	case "pg":
		cfg, err := pgxpool.ParseConfig(*lockURL)
		if err != nil {
			fail(err)
		}
		cfg.ConnConfig.RuntimeParams["application_name"] = fmt.Sprintf("faults-lock-%d", os.Getpid())
		cfg.MaxConns = 4
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			fail(err)
		}
		b = pglock.New(pool, pglock.WithSessions(1), pglock.WithHealthInterval(*healthInt))
		closers = append(closers, pool.Close)
	case "mysql", "mysqltable":
		db, err := sql.Open("mysql", *mysqlDSN)
		if err != nil {
			fail(err)
		}
		opts := []mysqllock.Option{mysqllock.WithHealthInterval(*healthInt), mysqllock.WithPollInterval(50 * time.Millisecond)}
		if *backend == "mysql" {
			b = mysqllock.New(db, opts...)
		} else {
			b = mysqllock.NewTable(db, opts...)
		}
		closers = append(closers, func() { db.Close() })
	case "zk":
		zb, err := zklock.Dial(ctx, strings.Split(*addr, ","), zklock.WithSessionTimeout(*zkSession))
		if err != nil {
			fail(err)
		}
		b = zb
	default:
		open, ok := extra[*backend]
		if !ok {
			fail(fmt.Errorf("unknown backend %q", *backend))
		}
		eb, closer, err := open(ctx, *addr)
		if err != nil {
			fail(err)
		}
		b = eb
		closers = append(closers, closer)
	}
	switch *broken {
	case "":
	case "short", "ignore":
		b = &brokenBackend{Backend: b, mode: *broken}
	default:
		fail(fmt.Errorf("unknown -broken %q", *broken))
	}
	client := lockx.New(b, lockx.WithObserver(renewals{client: *id}))

	rcfg, err := pgxpool.ParseConfig(*regURL)
	if err != nil {
		fail(err)
	}
	rcfg.ConnConfig.RuntimeParams["application_name"] = fmt.Sprintf("faults-writer-%d", os.Getpid())
	rcfg.MaxConns = 2
	reg, err := pgxpool.NewWithConfig(ctx, rcfg)
	if err != nil {
		fail(err)
	}

	var lock *lockx.Lock
	seq := int64(0)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "acquire":
			wait := time.Second
			if len(f) > 1 {
				ms, _ := strconv.Atoi(f[1])
				wait = time.Duration(ms) * time.Millisecond
			}
			e := Event{Ev: "lock", Client: *id, Call: faults.Now()}
			actx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
			l, err := client.Acquire(actx, *key, lockx.WithWatchdog(*lease), lockx.WithWait(wait))
			cancel()
			e.Ret = faults.Now()
			if err != nil {
				e.Err = err.Error()
				// lockx promises that a refused or unavailable acquire holds
				// nothing; anything else is an unknown outcome.
				e.Unknown = !errors.Is(err, lockx.ErrNotAcquired) && !errors.Is(err, lockx.ErrUnavailable)
			} else {
				lock = l
				e.OK, e.Token = true, uint64(l.Token())
				go func(l *lockx.Lock) {
					<-l.Lost()
					emit(Event{Ev: "lost", Client: *id, Call: faults.Now(), Token: uint64(l.Token())})
				}(l)
			}
			emit(e)
		case "check":
			emit(Event{Ev: "check", Client: *id, Held: lock != nil && lock.Context().Err() == nil, Call: faults.Now()})
		case "write":
			if lock == nil {
				emit(Event{Ev: "error", Client: *id, Err: "write without a lock"})
				continue
			}
			tok := lock.Token()
			for _, r := range []struct {
				name, id string
			}{{"fenced", *fenced}, {"plain", *plain}} {
				if r.id == "" {
					continue
				}
				seq++
				val := int64(*id)*1_000_000 + seq
				rmw(ctx, reg, *id, r.name, r.id, tok, val)
			}
			emit(Event{Ev: "wrote", Client: *id})
		case "release":
			if lock == nil {
				continue
			}
			e := Event{Ev: "lock", Client: *id, Release: true, Call: faults.Now()}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := lock.Release(rctx)
			cancel()
			e.Ret = faults.Now()
			e.OK = err == nil
			if err != nil {
				e.Err = err.Error()
			}
			lock = nil
			emit(e)
		case "quit":
			client.Close()
			reg.Close()
			for _, c := range closers {
				c()
			}
			return
		}
	}
}

// rmw reads register id and writes val to it with token tok (fenced or
// not), retrying a write whose outcome is unknown up to three times.
func rmw(ctx context.Context, pool *pgxpool.Pool, client int, name, id string, tok lockx.Token, val int64) {
	for attempt := 0; attempt < 3; attempt++ {
		e := Event{Ev: "op", Client: client, Reg: name, Call: faults.Now()}
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := pool.QueryRow(octx, `SELECT val FROM faults_register WHERE id = $1`, id).Scan(&e.Val)
		cancel()
		e.Ret = faults.Now()
		if err != nil {
			e.Unknown, e.Err = true, err.Error()
			emit(e)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		emit(e)
		break
	}
	for attempt := 0; attempt < 3; attempt++ {
		e := Event{Ev: "op", Client: client, Reg: name, Write: true, Val: val, Token: uint64(tok), Call: faults.Now()}
		err := write(ctx, pool, name == "fenced", id, tok, val)
		e.Ret = faults.Now()
		switch {
		case err == nil:
			e.OK = true
		case errors.Is(err, lockx.ErrStaleToken):
			e.Err = err.Error()
		default:
			e.Unknown, e.Err = true, err.Error()
		}
		emit(e)
		if !e.Unknown {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func write(ctx context.Context, pool *pgxpool.Pool, fenced bool, id string, tok lockx.Token, val int64) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	const upd = `UPDATE faults_register SET val = $1, tok = $2 WHERE id = $3`
	if !fenced {
		_, err := pool.Exec(ctx, upd, val, int64(tok), id)
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := pglock.FencedExec(ctx, tx, id, tok, upd, val, int64(tok), id)
		return err
	})
}

// renewals reports every lease renewal as a "renew" event, stamped with
// the renewal's call time on the suite's clock.
type renewals struct {
	lockx.NopObserver
	client int
}

func (r renewals) Extended(_ context.Context, e lockx.ExtendEvent) {
	call := faults.Now() - int64(time.Since(e.Start))
	emit(Event{Ev: "renew", Client: r.client, Token: uint64(e.Token), OK: e.Status == lockx.StatusOK, Call: call, Ret: faults.Now()})
}

// brokenBackend is a deliberately broken lock (-broken).
type brokenBackend struct {
	driver.Backend
	mode string
}

func (b *brokenBackend) key(k string) string {
	if b.mode == "ignore" {
		return k + "/ignored"
	}
	return k
}

func (b *brokenBackend) lease(d time.Duration) time.Duration {
	if b.mode == "short" {
		return d / 2
	}
	return d
}

func (b *brokenBackend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	asked := req.Lease
	req.Key, req.Lease, req.Renewed = b.key(req.Key), b.lease(req.Lease), false
	res, err := b.Backend.Acquire(ctx, req)
	if res.Acquired && b.mode == "short" {
		res.TTL = asked // claims the lease asked for
	}
	return res, err
}

func (b *brokenBackend) Extend(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	return b.Backend.Extend(ctx, b.key(key), owner, b.lease(lease))
}

func (b *brokenBackend) Release(ctx context.Context, key string, owner lockx.Owner) error {
	return b.Backend.Release(ctx, b.key(key), owner)
}

func (b *brokenBackend) TTL(ctx context.Context, key string, owner lockx.Owner) (time.Duration, error) {
	return b.Backend.TTL(ctx, b.key(key), owner)
}
