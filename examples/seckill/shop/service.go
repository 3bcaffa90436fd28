// Package shop is the seckill example's flash-sale service and its load
// generator: an Echo v4 service selling through patterns/stock, with the
// Idempotency-Key middleware on POST /orders, the fencing middleware on the
// admin restock, a cronguard job expiring reservations, and a live page.
package shop

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/middleware/echomw"
	"github.com/lockx-go/lockx/patterns/cronguard"
	"github.com/lockx-go/lockx/patterns/idempotency"
	"github.com/lockx-go/lockx/patterns/stock"
)

//go:embed web
var webFS embed.FS

// Product is one SKU on sale.
type Product struct {
	SKU   string `json:"sku"`
	Name  string `json:"name"`
	Price int64  `json:"price"` // cents
	Stock int64  `json:"initial_stock"`
}

// DefaultProducts is the catalogue of the example.
func DefaultProducts(flashStock int64) []Product {
	return []Product{
		{SKU: "phone", Name: "Flash-sale phone", Price: 9900, Stock: flashStock},
		{SKU: "earbuds", Name: "Earbuds", Price: 1900, Stock: 200},
	}
}

// Config configures one service instance.
type Config struct {
	Sale       string        // namespace of this sale's keys; replicas share it
	Instance   string        // this replica's name
	Products   []Product     // catalogue
	Segments   int           // stock segments per SKU (default 16)
	Hold       time.Duration // default reservation hold when an order asks for one
	CronEvery  time.Duration // expiry job period (default 1 s)
	AdminLease time.Duration // lease of an admin restock lock (default 1 s)
	Logger     *slog.Logger  // default: discard
}

// Service is one replica of the flash-sale service.
type Service struct {
	cfg     Config
	b       *Backends
	stats   *Stats
	locks   *lockx.Client
	fences  driver.FenceStore
	inspect driver.Inspector // nil if the lock backend has none
	stocks  map[string]*stock.Stock
	job     *cronguard.Job
	e       *echo.Echo

	srv      *http.Server
	stopCron context.CancelFunc
	wg       sync.WaitGroup
	demo     sync.Mutex // one demo sale at a time
	demoCtx  context.Context
	demoStop context.CancelFunc
	self     string // base URL once serving
}

// New builds a replica on b. Replicas built on the same Backends share
// locks, stock, fences and orders; stats may be shared or nil.
func New(ctx context.Context, b *Backends, cfg Config, stats *Stats) (*Service, error) {
	if cfg.Sale == "" {
		cfg.Sale = "demo"
	}
	if cfg.Instance == "" {
		cfg.Instance = "seckill-1"
	}
	if len(cfg.Products) == 0 {
		cfg.Products = DefaultProducts(1000)
	}
	if cfg.Segments <= 0 {
		cfg.Segments = stock.DefaultSegments
	}
	if cfg.Hold <= 0 {
		cfg.Hold = 2 * time.Second
	}
	if cfg.CronEvery <= 0 {
		cfg.CronEvery = time.Second
	}
	if cfg.AdminLease <= 0 {
		cfg.AdminLease = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if stats == nil {
		stats = NewStats()
	}
	lb, err := b.newLocks()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, b: b, stats: stats, stocks: map[string]*stock.Stock{}}
	s.demoCtx, s.demoStop = context.WithCancel(context.Background())
	s.locks = lockx.New(lb, lockx.WithWatchdog(5*time.Second))
	s.fences = b.fences(lb)
	driver.As(lb, &s.inspect)
	fail := func(err error) (*Service, error) { s.demoStop(); _ = s.locks.Close(); return nil, err }

	for _, p := range cfg.Products {
		opts := []stock.Option{stock.WithSegments(cfg.Segments)}
		if b.orders != nil {
			opts = append(opts, stock.WithOrders(b.orders))
		}
		st := stock.New(s.locks, s.sku(p.SKU), opts...)
		if _, err := st.Init(ctx, p.Stock); err != nil {
			return fail(fmt.Errorf("init %s: %w", p.SKU, err))
		}
		s.stocks[p.SKU] = st
	}
	guard, err := idempotency.New(s.locks, idempotency.WithStore(b.results(lb)),
		idempotency.WithPrefix("seckill:"+cfg.Sale+":idem:"))
	if err != nil {
		return fail(err)
	}
	s.job, err = cronguard.Guard(s.locks, "seckill:"+cfg.Sale+":expire-reservations", s.expire,
		cronguard.Every(cfg.CronEvery), cronguard.WithInstance(cfg.Instance),
		cronguard.OnSkip(func(*cronguard.SkipError) { s.stats.CronSkips.Add(1) }))
	if err != nil {
		return fail(err)
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = problemHandler
	web, _ := fs.Sub(webFS, "web")
	e.GET("/", echo.WrapHandler(http.FileServer(http.FS(web))))
	e.GET("/api/products", s.products)
	e.GET("/api/stats", s.statsHandler)
	e.POST("/orders", s.createOrder, echomw.IdempotencyWithConfig(echomw.IdempotencyConfig{
		Guard: guard, AcceptUnquoted: true,
	}))
	e.GET("/orders/:id", s.getOrder)
	e.POST("/orders/:id/pay", s.payOrder, echomw.Serialize(s.locks, echomw.ParamKey("seckill:"+cfg.Sale+":order:", "id")))
	e.POST("/admin/lease", s.adminLease)
	e.POST("/admin/products/:sku/restock", s.restock, echomw.FencingWithConfig(echomw.FencingConfig{
		Store: s.fences,
		ErrorHandler: func(c echo.Context, err error) error {
			var he *echo.HTTPError
			if errors.As(err, &he) && he.Code == http.StatusConflict {
				s.stats.StaleRejected.Add(1)
			}
			return err
		},
	}))
	e.POST("/api/demo", s.startDemo)
	s.e = e
	return s, nil
}

func (s *Service) sku(sku string) string        { return "seckill:" + s.cfg.Sale + ":" + sku }
func (s *Service) restockKey(sku string) string { return "seckill:" + s.cfg.Sale + ":restock:" + sku }

// Handler is the service's HTTP handler.
func (s *Service) Handler() http.Handler { return s.e }

// Serve serves on ln and runs the expiry job until Shutdown.
func (s *Service) Serve(ln net.Listener) {
	s.self = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s.e, ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopCron = cancel
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("serve", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.cfg.CronEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = s.job.RunNow(ctx) // a skip means another replica ran this trigger
			}
		}
	}()
}

// Shutdown stops accepting requests, lets in-flight ones finish (within
// ctx), stops the expiry job and releases every lock this replica holds.
func (s *Service) Shutdown(ctx context.Context) error {
	var err error
	if s.srv != nil {
		err = s.srv.Shutdown(ctx)
		s.stopCron()
		s.wg.Wait()
	}
	s.demoStop()
	s.demo.Lock() // a demo sale in flight ends first
	defer s.demo.Unlock()
	return errors.Join(err, s.locks.Close())
}

// expire is the cronguard job: it returns expired reservations' units.
func (s *Service) expire(ctx context.Context) error {
	if trig, ok := cronguard.TriggerFromContext(ctx); ok {
		s.stats.cronRun(trig)
	}
	var errs []error
	for _, st := range s.stocks {
		n, err := st.Expire(ctx)
		s.stats.ExpiredUnits.Add(n)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ProductState is a product with its live stock.
type ProductState struct {
	Product
	Supplied  int64 `json:"supplied"`
	Available int64 `json:"available"`
	Confirmed int64 `json:"sold"`
	Reserved  int64 `json:"reserved"`
	Balanced  bool  `json:"balanced"`
}

func (s *Service) productStates(ctx context.Context) ([]ProductState, error) {
	var out []ProductState
	for _, p := range s.cfg.Products {
		r, err := s.stocks[p.SKU].Reconcile(ctx)
		if err != nil && !errors.Is(err, stock.ErrUnbalanced) {
			return nil, err
		}
		out = append(out, ProductState{Product: p, Supplied: r.Supplied, Available: r.Available,
			Confirmed: r.Confirmed, Reserved: r.Reserved, Balanced: r.Balanced()})
	}
	return out, nil
}

func (s *Service) products(c echo.Context) error {
	ps, err := s.productStates(c.Request().Context())
	if err != nil {
		return answer(c, http.StatusServiceUnavailable, "stock unavailable", err)
	}
	return c.JSON(http.StatusOK, ps)
}

// Snapshot is what GET /api/stats answers and the page shows.
type Snapshot struct {
	Instance          string         `json:"instance"`
	Backends          []string       `json:"backends"`
	Products          []ProductState `json:"products"`
	Paid              int64          `json:"paid"`
	OrdersPerSecond   float64        `json:"orders_per_second"`
	SoldOutAnswers    int64          `json:"sold_out_answers"`
	BusyAnswers       int64          `json:"busy_answers"`
	HeldLocks         int            `json:"held_locks"` // -1: the backend has no Inspector
	Locks             []HeldLock     `json:"locks"`      // the first 8
	StaleRejected     int64          `json:"stale_writes_rejected"`
	Restocks          int64          `json:"restocks"`
	CronRuns          int64          `json:"cron_runs"`
	CronSkips         int64          `json:"cron_skips"`
	DuplicateCronRuns int            `json:"duplicate_cron_runs"`
	ExpiredUnits      int64          `json:"expired_units"`
	Audit             Audit          `json:"audit"`
}

// HeldLock is a lock held in the backend, as the page shows it. Durations
// are in milliseconds, as everywhere in the service's JSON; 0 is unknown.
type HeldLock struct {
	Key     string      `json:"key"`
	Owner   lockx.Owner `json:"owner"`
	Token   lockx.Token `json:"token"`
	TTLms   int64       `json:"ttl_ms"`
	AgeMs   int64       `json:"age_ms"`
	Waiters int         `json:"waiters"` // -1: unknown
}

func heldLock(li lockx.LockInfo) HeldLock {
	return HeldLock{Key: li.Key, Owner: li.Owner, Token: li.Token, TTLms: li.TTL.Milliseconds(),
		AgeMs: li.Age.Milliseconds(), Waiters: li.Waiters}
}

// Snapshot reads the live state.
func (s *Service) Snapshot(ctx context.Context) (Snapshot, error) {
	ps, err := s.productStates(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	a, err := s.b.book.Audit(ctx, s.cfg.Sale)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{
		Instance: s.cfg.Instance, Backends: s.b.Describe, Products: ps,
		Paid: s.stats.Paid.Load(), OrdersPerSecond: s.stats.OrdersPerSecond(time.Now()),
		SoldOutAnswers: s.stats.SoldOut.Load(), BusyAnswers: s.stats.Busy.Load(),
		HeldLocks: -1, Locks: []HeldLock{},
		StaleRejected: s.stats.StaleRejected.Load(), Restocks: s.stats.Restocks.Load(),
		CronRuns: s.stats.CronRuns.Load(), CronSkips: s.stats.CronSkips.Load(),
		DuplicateCronRuns: s.stats.DuplicateCronRuns(), ExpiredUnits: s.stats.ExpiredUnits.Load(),
		Audit: a,
	}
	if s.inspect != nil {
		snap.HeldLocks = 0
		_ = s.inspect.Locks(ctx, "", func(li lockx.LockInfo) bool {
			snap.HeldLocks++
			if len(snap.Locks) < 8 {
				snap.Locks = append(snap.Locks, heldLock(li))
			}
			return snap.HeldLocks < 100000
		})
	}
	return snap, nil
}

func (s *Service) statsHandler(c echo.Context) error {
	snap, err := s.Snapshot(c.Request().Context())
	if err != nil {
		return answer(c, http.StatusServiceUnavailable, "stats unavailable", err)
	}
	return c.JSON(http.StatusOK, snap)
}

// OrderRequest is the body of POST /orders.
type OrderRequest struct {
	SKU  string `json:"sku"`
	User string `json:"user"`
	Qty  int64  `json:"qty"`
	// HoldMS, if positive, reserves the units for that long instead of
	// buying: POST /orders/:id/pay confirms, the expiry job returns them.
	HoldMS int64 `json:"hold_ms"`
}

// verdict maps a stock error to the answer. 503 (busy) is not stored by
// the idempotency middleware, so a retry with the same key tries again;
// sold out and limit are final and replayed.
func (s *Service) verdict(c echo.Context, err error) error {
	switch {
	case errors.Is(err, stock.ErrSoldOut):
		s.stats.SoldOut.Add(1)
		return answer(c, http.StatusGone, "sold out", nil)
	case errors.Is(err, stock.ErrLimit):
		return answer(c, http.StatusForbidden, "one per buyer", nil)
	case errors.Is(err, stock.ErrExpired):
		return answer(c, http.StatusGone, "reservation expired", nil)
	default:
		s.stats.Busy.Add(1)
		c.Response().Header().Set("Retry-After", "1")
		return answer(c, http.StatusServiceUnavailable, "try again", err)
	}
}

func (s *Service) createOrder(c echo.Context) error {
	var req OrderRequest
	if err := json.NewDecoder(c.Request().Body).Decode(&req); err != nil {
		return answer(c, http.StatusBadRequest, "bad body", err)
	}
	if req.Qty == 0 {
		req.Qty = 1
	}
	st, ok := s.stocks[req.SKU]
	if !ok || req.User == "" || req.Qty < 0 {
		return answer(c, http.StatusBadRequest, "unknown sku, no user or bad qty", nil)
	}
	ctx := c.Request().Context()
	var (
		so  *stock.Order
		err error
	)
	if req.HoldMS > 0 {
		so, err = st.Reserve(ctx, req.User, req.Qty, time.Duration(req.HoldMS)*time.Millisecond)
	} else {
		so, err = st.Buy(ctx, req.User, req.Qty)
	}
	if err != nil {
		return s.verdict(c, err)
	}
	o := Order{ID: so.ID, Sale: s.cfg.Sale, SKU: req.SKU, User: req.User, Qty: req.Qty,
		Status: "paid", Created: time.Now().UTC(), Stock: so}
	if req.HoldMS > 0 {
		o.Status, o.Deadline = "reserved", so.Deadline
	}
	if err := s.b.book.Put(ctx, o); err != nil {
		_ = st.Cancel(context.WithoutCancel(ctx), so) // no record, no sale
		return s.verdict(c, err)
	}
	if o.Status == "paid" {
		s.stats.paid(time.Now())
	} else {
		s.stats.Reserved.Add(1)
	}
	c.Response().Header().Set("Location", "/orders/"+o.ID)
	return c.JSON(http.StatusCreated, o)
}

func (s *Service) lookup(c echo.Context) (Order, error) {
	o, ok, err := s.b.book.Get(c.Request().Context(), s.cfg.Sale, c.Param("id"))
	switch {
	case err != nil:
		return o, answer(c, http.StatusServiceUnavailable, "order store", err)
	case !ok:
		return o, answer(c, http.StatusNotFound, "no such order", nil)
	}
	if o.Status == "reserved" && time.Now().After(o.Deadline) {
		o.Status = "expired"
	}
	return o, nil
}

func (s *Service) getOrder(c echo.Context) error {
	o, err := s.lookup(c)
	if err != nil || c.Response().Committed {
		return err
	}
	return c.JSON(http.StatusOK, o)
}

// payOrder confirms a reservation. It runs under the order's lock
// (Serialize), so two payments of one order never interleave.
func (s *Service) payOrder(c echo.Context) error {
	o, err := s.lookup(c)
	if err != nil || c.Response().Committed {
		return err
	}
	if o.Status == "paid" {
		return c.JSON(http.StatusOK, o)
	}
	ctx := c.Request().Context()
	if err := s.stocks[o.SKU].Confirm(ctx, o.Stock); err != nil {
		if errors.Is(err, stock.ErrExpired) {
			o.Status = "expired"
			_ = s.b.book.Put(ctx, o)
		}
		return s.verdict(c, err)
	}
	o.Status, o.Deadline = "paid", time.Time{}
	if err := s.b.book.Put(ctx, o); err != nil {
		return s.verdict(c, err)
	}
	s.stats.paid(time.Now())
	return c.JSON(http.StatusOK, o)
}

// Lease is an admin's restock lock: write with Lock-Key and Fencing-Token.
type Lease struct {
	Key     string      `json:"lock_key"`
	Token   lockx.Token `json:"fencing_token"`
	LeaseMS int64       `json:"lease_ms"`
}

// adminLease takes the SKU's restock lock for AdminLease and hands its key
// and fencing token to the admin. The lock is not released: it lapses, as
// an admin tool's would if the admin paused (GC, network) past the lease.
func (s *Service) adminLease(c echo.Context) error {
	sku := c.QueryParam("sku")
	if _, ok := s.stocks[sku]; !ok {
		return answer(c, http.StatusBadRequest, "unknown sku", nil)
	}
	key := s.restockKey(sku)
	l, err := s.locks.Acquire(c.Request().Context(), key,
		lockx.WithLease(s.cfg.AdminLease), lockx.WithWait(10*s.cfg.AdminLease))
	if err != nil {
		return answer(c, http.StatusServiceUnavailable, "restock lock busy", err)
	}
	return c.JSON(http.StatusOK, Lease{Key: key, Token: l.Token(), LeaseMS: s.cfg.AdminLease.Milliseconds()})
}

// restock adds units. The fencing middleware has already refused a token
// older than one it accepted for the lock key (409).
func (s *Service) restock(c echo.Context) error {
	sku := c.Param("sku")
	st, ok := s.stocks[sku]
	f, _ := echomw.FenceFromContext(c)
	if !ok || f.Resource != s.restockKey(sku) {
		return answer(c, http.StatusBadRequest, "unknown sku or Lock-Key not its restock lock", nil)
	}
	n, err := strconv.ParseInt(c.QueryParam("n"), 10, 64)
	if err != nil || n <= 0 {
		return answer(c, http.StatusBadRequest, "n must be a positive count", err)
	}
	if err := st.Restock(c.Request().Context(), n); err != nil {
		return answer(c, http.StatusServiceUnavailable, "restock", err)
	}
	s.stats.Restocks.Add(1)
	return c.JSON(http.StatusOK, map[string]any{"sku": sku, "added": n, "token": f.Token})
}

// startDemo runs a sale against this replica from the page's button.
func (s *Service) startDemo(c echo.Context) error {
	if !s.demo.TryLock() {
		return answer(c, http.StatusConflict, "a demo sale is running", nil)
	}
	target := s.self
	go func() {
		defer s.demo.Unlock()
		ctx, cancel := context.WithTimeout(s.demoCtx, 2*time.Minute)
		defer cancel()
		_, _ = RunLoad(ctx, LoadConfig{Targets: []string{target}, SKU: "phone", Buyers: 1500, Restock: 20})
	}()
	return c.JSON(http.StatusAccepted, map[string]string{"status": "sale started"})
}
