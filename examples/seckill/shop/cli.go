package shop

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

type common struct {
	redisURL, postgresURL, sale string
	stock                       int
	segments                    int
	cronEvery                   time.Duration
}

func (c *common) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.redisURL, "redis", os.Getenv("LOCKX_REDIS_URL"), "Redis URL (env LOCKX_REDIS_URL); empty with no -postgres: embedded miniredis")
	fs.StringVar(&c.postgresURL, "postgres", os.Getenv("LOCKX_POSTGRES_URL"), "PostgreSQL URL (env LOCKX_POSTGRES_URL)")
	fs.StringVar(&c.sale, "sale", envOr("SECKILL_SALE", ""), "sale name, the namespace of its keys (env SECKILL_SALE; default a new one per run)")
	fs.IntVar(&c.stock, "stock", envInt("SECKILL_STOCK", 1000), "units of the flash-sale product (env SECKILL_STOCK)")
	fs.IntVar(&c.segments, "segments", 16, "stock segments per product")
	fs.DurationVar(&c.cronEvery, "cron", time.Second, "period of the reservation-expiry job")
}

func (c *common) open(ctx context.Context) (*Backends, Config, error) {
	if c.sale == "" {
		c.sale = "sale-" + randomHex(4)
	}
	b, err := Open(ctx, c.redisURL, c.postgresURL)
	if err != nil {
		return nil, Config{}, err
	}
	return b, Config{Sale: c.sale, Products: DefaultProducts(int64(c.stock)), Segments: c.segments, CronEvery: c.cronEvery}, nil
}

type loadFlags struct {
	replicas, buyers, concurrency int
	lostReply, abandon            float64
	restock                       int64
	targets                       string
}

func (l *loadFlags) flags(fs *flag.FlagSet) {
	fs.IntVar(&l.replicas, "replicas", 3, "service replicas started in this process, sharing the backends")
	fs.IntVar(&l.buyers, "buyers", 3000, "buyers, one unit each")
	fs.IntVar(&l.concurrency, "concurrency", 64, "buyers in flight at once")
	fs.Float64Var(&l.lostReply, "lost-reply", 0.2, "share of buyers that resend their Idempotency-Key after an answer")
	fs.Float64Var(&l.abandon, "abandon", 0.02, "share of buyers that reserve and never pay")
	fs.Int64Var(&l.restock, "restock", 50, "units an admin restocks mid-sale while a stale admin races it (0: none)")
	fs.StringVar(&l.targets, "target", "", "comma-separated URLs of running services instead of in-process replicas")
}

func (l *loadFlags) config(progress io.Writer) LoadConfig {
	neg := func(f float64) float64 { // the flag's 0 means none
		if f == 0 {
			return -1
		}
		return f
	}
	return LoadConfig{Buyers: l.buyers, Concurrency: l.concurrency, LostReply: neg(l.lostReply),
		Abandon: neg(l.abandon), Restock: l.restock, Progress: progress}
}

// LoadMain is the load generator's command line (go run
// ./examples/seckill/loadgen, or go run ./examples/seckill -loadgen).
func LoadMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	var l loadFlags
	c.flags(fs)
	l.flags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	r, err := runLoadCLI(ctx, &c, &l, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	if err := r.Check(); err != nil {
		return 1
	}
	return 0
}

func runLoadCLI(ctx context.Context, c *common, l *loadFlags, out io.Writer) (Report, error) {
	cfg := l.config(out)
	if l.targets != "" {
		cfg.Targets = strings.Split(l.targets, ",")
		return RunLoad(ctx, cfg)
	}
	b, scfg, err := c.open(ctx)
	if err != nil {
		return Report{}, err
	}
	defer b.Close()
	for _, d := range b.Describe {
		fmt.Fprintln(out, "seckill: backend:", d)
	}
	svcs, urls, err := StartReplicas(ctx, b, scfg, l.replicas)
	if err != nil {
		return Report{}, err
	}
	fmt.Fprintf(out, "seckill: %d replica(s) at %s, sale %q, %d units of %q\n", len(urls), strings.Join(urls, " "), scfg.Sale, c.stock, "phone")
	cfg.Targets = urls
	r, err := RunLoad(ctx, cfg)
	return r, errors.Join(err, StopReplicas(svcs))
}

// ServeMain is the service's command line (go run ./examples/seckill).
func ServeMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seckill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	var l loadFlags
	c.flags(fs)
	addr := fs.String("addr", envOr("SECKILL_ADDR", "127.0.0.1:8080"), "listen address (env SECKILL_ADDR); if the default is taken, a free port")
	load := fs.Bool("loadgen", false, "run a flash sale against in-process replicas, print the report and exit")
	once := fs.Bool("exit-after-start", false, "exit right after starting (smoke test)")
	l.flags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *load {
		r, err := runLoadCLI(ctx, &c, &l, stdout)
		if err != nil {
			fmt.Fprintln(stderr, "seckill:", err)
			return 1
		}
		if r.Check() != nil {
			return 1
		}
		return 0
	}
	b, cfg, err := c.open(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "seckill:", err)
		return 1
	}
	defer b.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil && errors.Is(err, syscall.EADDRINUSE) && !isSet(fs, "addr") && os.Getenv("SECKILL_ADDR") == "" {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		fmt.Fprintln(stderr, "seckill:", err)
		return 1
	}
	cfg.Instance = "seckill-1"
	svc, err := New(ctx, b, cfg, nil)
	if err != nil {
		ln.Close()
		fmt.Fprintln(stderr, "seckill:", err)
		return 1
	}
	svc.Serve(ln)
	url := "http://" + ln.Addr().String()
	for _, d := range b.Describe {
		fmt.Fprintln(stdout, "seckill: backend:", d)
	}
	fmt.Fprintf(stdout, "seckill: sale %q: %d units of \"phone\", 200 of \"earbuds\"\n", cfg.Sale, c.stock)
	fmt.Fprintf(stdout, "seckill: listening on %s — open it for the live page and press \"Start a sale\"\n", url)
	fmt.Fprintf(stdout, "seckill: or: go run ./examples/seckill/loadgen -target %s\n", url)
	fmt.Fprintln(stdout, "seckill: or: go run ./examples/seckill -loadgen   (3 replicas, report, exit)")
	if !*once {
		<-ctx.Done()
		fmt.Fprintln(stdout, "seckill: shutting down: in-flight orders finish, locks are released")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := svc.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, "seckill: shutdown:", err)
		return 1
	}
	return 0
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
