package stock

import (
	"errors"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Mode selects how a deduction is made atomic.
type Mode uint8

const (
	// LockFree deducts with one atomic conditional step per segment (a Lua
	// script on Redis, UPDATE … WHERE n >= q on PostgreSQL): no lock, one
	// round trip. The default.
	LockFree Mode = iota
	// Locked takes the segment's lockx lock, reads the level and writes it
	// back (the classic segment-lock design). The write is a compare-and-swap
	// on the level read, so a holder that lost its lock mid-way cannot
	// oversell; it only fails and retries.
	Locked
)

// String returns "lock-free" or "locked".
func (m Mode) String() string {
	if m == Locked {
		return "locked"
	}
	return "lock-free"
}

// DefaultSegments is the segment count without WithSegments or
// WithConcurrency: 16, the striping width that Java's ConcurrentHashMap
// long used by default (its concurrencyLevel).
const DefaultSegments = 16

// Verdicts of a Stock. Test for them with errors.Is.
var (
	// ErrSoldOut reports that fewer units than asked for are available in
	// the whole SKU (all segments together), or — with WithSoldOutCache —
	// were when this process last looked, or that the order store's supply
	// cap refused the order (it then also matches
	// driver.ErrSupplyExceeded).
	ErrSoldOut = errors.New("stock: sold out")
	// ErrLimit reports that the buyer has reached the per-user purchase
	// limit. It also matches driver.ErrQuotaExceeded or
	// driver.ErrDuplicateOrder, whichever refused the order.
	ErrLimit = errors.New("stock: purchase limit reached")
	// ErrBusy reports a purchase refused by the local rate limit
	// (WithLocalRate) before it reached the backend.
	ErrBusy = errors.New("stock: too many requests")
	// ErrExpired reports the confirmation of a reservation that expired; its
	// units went back to the stock.
	ErrExpired = errors.New("stock: reservation expired")
	// ErrNotInitialised reports a purchase before Init.
	ErrNotInitialised = errors.New("stock: not initialised (call Init)")
)

// Option configures a Stock.
type Option func(*Stock)

// WithSegments sets the segment count K (1 ≤ k ≤ driver.MaxStockSegments).
// It matters only to the Init that creates the SKU; later Stocks adopt the
// SKU's count.
func WithSegments(k int) Option {
	return func(s *Stock) {
		if k < 1 || k > driver.MaxStockSegments {
			s.fail(&lockx.ArgError{Arg: "segments", Reason: "out of range"})
			return
		}
		s.k = k
	}
}

// WithConcurrency derives K from the expected number of concurrent buyers
// across all processes: one segment per 64 buyers, between 4 and 256, so
// that contention per segment stays around what one hot key serves well.
func WithConcurrency(buyers int) Option {
	return func(s *Stock) {
		s.k = min(max(buyers/64, 4), 256)
	}
}

// WithMode selects LockFree (default) or Locked deduction.
func WithMode(m Mode) Option { return func(s *Stock) { s.mode = m } }

// WithLimit sets the per-user purchase limit in units (default 1: one unit
// per buyer and SKU). Zero or less turns the limit off. With limit 1 the
// order store also enforces it with a unique (SKU, user) constraint.
func WithLimit(n int64) Option { return func(s *Stock) { s.limit = n } }

// WithOrders persists every confirmed purchase in store (pglock.OrderStore
// for PostgreSQL). If persisting fails, the purchase fails and its units go
// back to the stock.
// Add WithSupplyCap where the ledger may lose acknowledged writes (Redis).
func WithOrders(store driver.OrderStore) Option { return func(s *Stock) { s.orders = store } }

// WithSupplyCap makes the order store (WithOrders) cap the SKU's live
// orders at its supply (driver.SupplyCap: pglock's and memlock's stores
// implement it; another store makes every call fail with
// errors.ErrUnsupported). Init and Restock tell the store the supply, and
// the store refuses an order that would put more units in live orders than
// that (ErrSoldOut): no oversell even if the ledger loses acknowledged
// writes, as Redis does in a failover — without the cap, the units of the
// entries a failover lost are sold a second time.
//
// It is off by default for its cost: one row per SKU that every order save
// and cancellation of the SKU updates, whose lock pglock holds until the
// commit, so a SKU's order commits run one at a time. With PostgreSQL's
// synchronous commit that cut purchases/s to about a quarter in
// BenchmarkRedisStockOrders (docs/patterns/stock.md). Every Stock of a SKU
// should agree: a Stock without the cap does not raise it on Restock.
func WithSupplyCap() Option { return func(s *Stock) { s.capOn = true } }

// DefaultPurchaseLease is how long Buy holds a purchase's units as a
// reservation while it saves the order (WithOrders).
const DefaultPurchaseLease = 30 * time.Second

// WithPurchaseLease sets how long Buy holds a purchase's units as a
// reservation while it saves the order (only with WithOrders): a process
// that dies mid-purchase leaves them for Expire to return once d has passed.
// Make it well above the time an order takes to save, and run Expire
// periodically. Default DefaultPurchaseLease.
func WithPurchaseLease(d time.Duration) Option {
	return func(s *Stock) {
		if d <= 0 {
			s.fail(&lockx.ArgError{Arg: "purchase lease", Reason: "must be positive"})
			return
		}
		s.lease = d
	}
}

// WithSoldOutCache turns on the hot-key guard: after a sold-out verdict this
// process answers ErrSoldOut locally for ttl, without asking the backend
// (a local pre-check: a sold-out SKU costs no round trip). Restock, Cancel and Expire through this
// Stock clear it; units returned through another process are seen after ttl.
func WithSoldOutCache(ttl time.Duration) Option {
	return func(s *Stock) {
		if ttl <= 0 {
			s.fail(&lockx.ArgError{Arg: "sold-out cache ttl", Reason: "must be positive"})
			return
		}
		s.soldOutTTL = ttl
	}
}

// WithLocalRate admits at most perSecond purchases per second from this
// process (bursts up to burst) and refuses the rest with ErrBusy before they
// reach the backend: local load shedding in front of a hot SKU.
func WithLocalRate(perSecond float64, burst int) Option {
	return func(s *Stock) {
		if perSecond <= 0 || burst < 1 {
			s.fail(&lockx.ArgError{Arg: "local rate", Reason: "need perSecond > 0 and burst ≥ 1"})
			return
		}
		s.rate = &bucket{rate: perSecond, burst: float64(burst), tokens: float64(burst)}
	}
}

// WithLockOptions sets the lockx options of the segment locks (Locked mode)
// and of the gathering lock, e.g. lockx.WithLease or lockx.WithWait.
func WithLockOptions(opts ...lockx.Option) Option {
	return func(s *Stock) { s.lockOpts = append(s.lockOpts, opts...) }
}

func (s *Stock) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// bucket is a token bucket: rate tokens per second up to burst.
type bucket struct {
	mu          sync.Mutex
	rate, burst float64
	tokens      float64
	last        time.Time
}

func (b *bucket) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
