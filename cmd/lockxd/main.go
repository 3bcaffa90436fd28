// Command lockxd is the optional lock service: one HTTP/JSON API over a
// lockx backend (Redis, PostgreSQL, ZooKeeper, or in-memory for development), with API
// keys bound to tenants, per-tenant namespaces, quotas and rate limits,
// per-tenant OpenTelemetry metrics served in the Prometheus text format, a
// health endpoint and an OpenAPI document. lockx/httplock is its Go client.
//
// See docs/lockxd.md.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/lockxd"
	"github.com/lockx-go/lockx/internal/redisurl"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/lockx/zklock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr, os.Getenv, nil))
}

type options struct {
	listen, redisURL, postgresURL, prefix, schema, namespace, keysFile string
	metricsListen, tlsCert, tlsKey, signingKeyFile, keySaltFile        string
	zookeeper, zkRoot                                                  string
	memory                                                             bool
	maxLease, maxWait, grace                                           time.Duration
}

// run starts the server and blocks until ctx ends; ready, if not nil,
// receives the bound address.
func run(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string, ready chan<- string) int {
	fs := flag.NewFlagSet("lockxd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.listen, "listen", envOr(getenv, "LOCKXD_LISTEN", "127.0.0.1:7420"), "listen `address` (env LOCKXD_LISTEN)")
	fs.StringVar(&o.metricsListen, "metrics-listen", getenv("LOCKXD_METRICS_LISTEN"), "listen `address` of every tenant's /metrics, for the scraper only (env LOCKXD_METRICS_LISTEN); the API's /metrics needs a key and shows its tenant")
	fs.StringVar(&o.tlsCert, "tls-cert", getenv("LOCKXD_TLS_CERT"), "serve TLS with this PEM certificate `file` (chain; env LOCKXD_TLS_CERT); needs --tls-key")
	fs.StringVar(&o.tlsKey, "tls-key", getenv("LOCKXD_TLS_KEY"), "PEM private key `file` of --tls-cert (env LOCKXD_TLS_KEY)")
	fs.StringVar(&o.signingKeyFile, "token-signing-key", getenv("LOCKXD_TOKEN_SIGNING_KEY_FILE"), "sign every grant's fencing token with the key in this `file` (at least 16 bytes; env LOCKXD_TOKEN_SIGNING_KEY_FILE) and require signed tokens at /v1/fence")
	fs.StringVar(&o.keySaltFile, "key-salt", getenv("LOCKXD_KEY_SALT_FILE"), "tag every backend key with an HMAC keyed by the secret in this `file` (at least 16 bytes; env LOCKXD_KEY_SALT_FILE), so no tenant can craft a key whose backend hash hits another's; the same on every replica, set before first use")
	fs.StringVar(&o.redisURL, "redis", getenv("LOCKX_REDIS_URL"), "Redis `URL` or host:port (env LOCKX_REDIS_URL)")
	fs.StringVar(&o.postgresURL, "postgres", getenv("LOCKX_POSTGRES_URL"), "PostgreSQL `URL` (env LOCKX_POSTGRES_URL)")
	fs.StringVar(&o.zookeeper, "zookeeper", getenv("LOCKX_ZOOKEEPER"), "ZooKeeper `servers`, host:port,... (env LOCKX_ZOOKEEPER)")
	fs.StringVar(&o.zkRoot, "zkroot", zklock.DefaultRoot, "ZooKeeper root znode of the backend")
	fs.BoolVar(&o.memory, "memory", false, "use an in-process backend (development only: locks die with the process)")
	fs.StringVar(&o.prefix, "prefix", "lockx:", "Redis key prefix of the backend")
	fs.StringVar(&o.schema, "schema", pglock.DefaultSchema, "PostgreSQL schema of the backend")
	fs.StringVar(&o.namespace, "namespace", pglock.DefaultNamespace, "PostgreSQL key namespace of the backend")
	fs.StringVar(&o.keysFile, "keys", getenv("LOCKXD_KEYS_FILE"), "API keys `file` (JSON; env LOCKXD_KEYS_FILE); env LOCKXD_KEYS adds tenant=key pairs")
	fs.DurationVar(&o.maxLease, "max-lease", 10*time.Minute, "longest lease a client may request")
	fs.DurationVar(&o.maxWait, "max-wait", time.Minute, "longest acquire long-poll")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "graceful shutdown: how long to let requests finish")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	fail := func(err error) int { logger.Error("lockxd", "err", err); return 1 }
	n := 0
	for _, b := range []bool{o.redisURL != "", o.postgresURL != "", o.zookeeper != "", o.memory} {
		if b {
			n++
		}
	}
	if n != 1 {
		fmt.Fprintln(stderr, "lockxd: want exactly one of --redis, --postgres, --zookeeper, --memory")
		return 2
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		fmt.Fprintln(stderr, "lockxd: --tls-cert and --tls-key go together")
		return 2
	}
	var tlsConf *tls.Config
	if o.tlsCert != "" {
		// Loaded before anything listens, so a bad pair fails the start.
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return fail(fmt.Errorf("--tls-cert/--tls-key: %w", err))
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	signingKey, err := readSecret("--token-signing-key", o.signingKeyFile)
	if err != nil {
		return fail(err)
	}
	keySalt, err := readSecret("--key-salt", o.keySaltFile)
	if err != nil {
		return fail(err)
	}
	tenants, err := lockxd.LoadKeys(o.keysFile, getenv("LOCKXD_KEYS"))
	if err != nil {
		return fail(err)
	}
	if len(tenants) == 0 {
		fmt.Fprintln(stderr, "lockxd: no API keys: set --keys or LOCKXD_KEYS")
		return 2
	}
	b, where, closeFn, err := connect(ctx, o)
	if err != nil {
		return fail(err)
	}
	defer closeFn()

	srv := lockxd.NewServer(b, lockxd.Config{MaxLease: o.maxLease, MaxWait: o.maxWait, Tenants: tenants, Logger: logger, TokenSigningKey: signingKey, KeySalt: keySalt})
	ln, err := listen(o.listen, tlsConf)
	if err != nil {
		return fail(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	servers := []*http.Server{hs}
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()
	logger.Info("lockxd listening", "addr", ln.Addr().String(), "backend", where.kind, "backend_addr", where.addr,
		"tenants", len(tenants), "tls", tlsConf != nil)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	if o.metricsListen != "" {
		mln, err := listen(o.metricsListen, tlsConf)
		if err != nil {
			_ = hs.Close()
			return fail(fmt.Errorf("--metrics-listen: %w", err))
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", srv.MetricsHandler())
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, ms)
		go func() { errc <- ms.Serve(mln) }()
		logger.Info("lockxd metrics listening", "addr", mln.Addr().String())
		if ready != nil {
			ready <- mln.Addr().String()
		}
	}
	select {
	case err := <-errc:
		return fail(err)
	case <-ctx.Done():
	}
	// Graceful: report draining, stop accepting, let requests (long-polls
	// included, bounded by their wait) finish within the grace period.
	// Locks need no hand-off: they live in the backend under their leases.
	srv.Shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), o.grace)
	defer cancel()
	for _, h := range servers {
		if err := h.Shutdown(sctx); err != nil {
			_ = h.Close()
		}
	}
	_ = srv.Close(sctx)
	logger.Info("lockxd stopped")
	return 0
}

// readSecret reads a secret of at least lockx.MinSigningKeyLen bytes from
// path (surrounding white space trimmed); "" means none.
func readSecret(flag, path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	k, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if k = []byte(strings.TrimSpace(string(k))); len(k) < lockx.MinSigningKeyLen {
		return nil, fmt.Errorf("%s: %d bytes, want at least %d", flag, len(k), lockx.MinSigningKeyLen)
	}
	return k, nil
}

// listen opens a TCP listener on addr, speaking TLS if conf is set.
func listen(addr string, conf *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || conf == nil {
		return ln, err
	}
	return tls.NewListener(ln, conf), nil
}

// backendAt names the backend lockxd serves and where it is, for the
// start-up log; addr never holds credentials.
type backendAt struct{ kind, addr string }

func envOr(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}

// connect opens the backend as cmd/lockx does (same flags and env).
func connect(ctx context.Context, o options) (driver.Backend, backendAt, func(), error) {
	switch {
	case o.memory:
		b := memlock.New()
		return b, backendAt{"memory", "in-process"}, func() { _ = b.Close() }, nil
	case o.zookeeper != "":
		b, err := zklock.Dial(ctx, strings.Split(o.zookeeper, ","), zklock.WithRoot(o.zkRoot))
		if err != nil {
			return nil, backendAt{}, nil, fmt.Errorf("--zookeeper: %w", err)
		}
		return b, backendAt{"zookeeper", o.zookeeper}, func() { _ = b.Close() }, nil
	case o.redisURL != "":
		ro, err := redisurl.Parse("--redis", o.redisURL)
		if err != nil {
			return nil, backendAt{}, nil, err
		}
		rdb := redis.NewClient(ro)
		b := redislock.New(rdb, redislock.WithPrefix(o.prefix))
		return b, backendAt{"redis", ro.Addr}, func() { _ = b.Close(); _ = rdb.Close() }, nil
	}
	cfg, err := pgxpool.ParseConfig(o.postgresURL)
	if err != nil {
		return nil, backendAt{}, nil, fmt.Errorf("--postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, backendAt{}, nil, fmt.Errorf("--postgres: %w", err)
	}
	b := pglock.New(pool, pglock.WithSchema(o.schema), pglock.WithNamespace(o.namespace))
	where := backendAt{"postgres", net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))}
	return b, where, func() { _ = b.Close(); pool.Close() }, nil
}
