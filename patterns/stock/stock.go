package stock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Stock is one SKU's inventory, split into segments, on a backend that
// implements driver.StockBackend. It is safe for concurrent use; any number
// of Stocks in any number of processes may serve the same SKU.
type Stock struct {
	c          *lockx.Client
	sb         driver.StockBackend
	sku        string
	k          int          // segments asked for (Init)
	segs       atomic.Int64 // the SKU's segment count, 0 before Init
	all        atomic.Pointer[[]int]
	mode       Mode
	limit      int64
	orders     driver.OrderStore
	supply     driver.SupplyCap // the order store's supply cap; nil without WithSupplyCap
	capOn      bool             // WithSupplyCap
	lease      time.Duration    // WithPurchaseLease
	soldOutTTL time.Duration
	soldOut    atomic.Int64 // unix nanos until which the local verdict holds
	rate       *bucket
	lockOpts   []lockx.Option
	err        error
}

// Order is a purchase or a reservation: Qty units taken from one or more
// segments (Parts). Keep it (it is plain data, safe to serialise; its JSON
// names are snake_case like the rest of lockx's JSON) to confirm or cancel
// later.
type Order struct {
	ID   string `json:"id"`
	SKU  string `json:"sku"`
	User string `json:"user"`
	Qty  int64  `json:"qty"`
	// Parts are where the units came from: one part, unless no single
	// segment held Qty units and the order was gathered from several.
	Parts []Part `json:"parts"`
	// Deadline is when an unconfirmed reservation expires (by the local
	// clock at Reserve; the backend's clock decides); zero once confirmed,
	// and then left out of the JSON.
	Deadline time.Time `json:"deadline,omitzero"`
}

// Part is the share of an Order held in one segment's ledger.
type Part struct {
	Seg   int    `json:"segment"`
	Qty   int64  `json:"qty"`
	Entry string `json:"entry"` // the ledger entry id
}

// New returns the stock of sku served through c. The backend of c must
// implement driver.StockBackend (memlock, redislock, pglock); c's locks serve
// the Locked mode and the gathering of multi-unit orders. A nil client, an
// invalid option or an unsupported backend (errors.ErrUnsupported) make
// every call fail. Call Init before buying.
func New(c *lockx.Client, sku string, opts ...Option) *Stock {
	// Goroutines of one process queue for a segment lock in-process first
	// (lockx.LocalFirst), so each process sends one contender per segment.
	s := &Stock{c: c, sku: sku, k: DefaultSegments, limit: 1, lease: DefaultPurchaseLease, lockOpts: []lockx.Option{lockx.LocalFirst()}}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if c == nil {
		s.fail(&lockx.ArgError{Arg: "client", Reason: "nil"})
		return s
	}
	if err := driver.CheckStockArgs(sku, 0); err != nil {
		s.fail(err)
	}
	var sb driver.StockBackend
	ok := driver.As(c.Backend(), &sb)
	if !ok {
		s.fail(fmt.Errorf("stock: backend %T does not implement driver.StockBackend: %w", c.Backend(), errors.ErrUnsupported))
	}
	s.sb = sb
	if s.capOn {
		sc, ok := s.orders.(driver.SupplyCap)
		if !ok {
			s.fail(fmt.Errorf("stock: WithSupplyCap: order store %T does not implement driver.SupplyCap: %w", s.orders, errors.ErrUnsupported))
		}
		s.supply = sc
	}
	return s
}

// SKU returns the stock's SKU.
func (s *Stock) SKU() string { return s.sku }

// Segments returns the SKU's segment count, 0 before Init.
func (s *Stock) Segments() int { return int(s.segs.Load()) }

// Mode returns the deduction mode.
func (s *Stock) Mode() Mode { return s.mode }

func (s *Stock) keyErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return &lockx.KeyError{Op: op, Key: s.sku, Err: err}
}

// Init creates the SKU with total units spread evenly over the segments,
// unless it exists; it reports whether it created it. Every Stock of the
// SKU calls it (with the same total) before its first purchase: the first
// call creates, the others adopt the SKU's segment count. Existing stock is
// never reset.
//
// With WithSupplyCap, Init also gives the SKU its cap if it has none: total
// when this call created the SKU, else the units the ledger says were
// supplied (a SKU sold before the cap existed; its live orders count
// against the cap). If those orders already exceed the supply, Init fails
// with an error matching driver.ErrSupplyExceeded — the SKU stays usable
// for Reconcile, and its orders are not capped.
func (s *Stock) Init(ctx context.Context, total int64) (bool, error) {
	if s.err != nil {
		return false, s.keyErr("init", s.err)
	}
	if total < 0 {
		return false, s.keyErr("init", &lockx.ArgError{Arg: "total", Reason: "must not be negative"})
	}
	levels := spread(total, s.k)
	n, created, err := s.sb.InitStock(ctx, s.sku, levels)
	if err != nil {
		return false, s.keyErr("init", err)
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	s.all.Store(&all)
	s.segs.Store(int64(n))
	if err := s.initSupply(ctx, created, total); err != nil {
		return created, s.keyErr("init", err)
	}
	return created, nil
}

// initSupply gives the SKU its supply cap if it has none (Init).
func (s *Stock) initSupply(ctx context.Context, created bool, total int64) error {
	if s.supply == nil {
		return nil
	}
	if !created {
		_, _, err := s.supply.Supply(ctx, s.sku)
		if !errors.Is(err, driver.ErrNoStock) {
			return err
		}
		total = 0
		for _, seg := range *s.all.Load() {
			sn, err := s.sb.StockSegment(ctx, s.sku, seg)
			if err != nil {
				return err
			}
			total += sn.Supplied
		}
	}
	_, err := s.supply.InitSupply(ctx, s.sku, total)
	return err
}

// spread splits total into k near-equal levels.
func spread(total int64, k int) []int64 {
	levels := make([]int64, k)
	for i := range levels {
		levels[i] = total / int64(k)
		if int64(i) < total%int64(k) {
			levels[i]++
		}
	}
	return levels
}

func (s *Stock) ready(op string) error {
	if s.err != nil {
		return s.keyErr(op, s.err)
	}
	if s.segs.Load() == 0 {
		return s.keyErr(op, ErrNotInitialised)
	}
	return nil
}

// Buy takes qty units for user and, with WithOrders, persists the order. It
// returns ErrSoldOut only when fewer than qty units are available in the
// whole SKU, whichever segment the buyer landed on, or when the order
// store's supply cap refused the order (driver.ErrSupplyExceeded: the
// ledger showed units that orders already hold, as after a Redis failover
// that lost ledger entries); ErrLimit when the buyer has reached the limit;
// ErrBusy when the local rate limit refused.
//
// With an order store a purchase spans two stores, so it is made in three
// steps: the units are taken as a reservation of the purchase lease
// (WithPurchaseLease), the order is saved, and the units are confirmed. A
// process that dies in between leaves a reservation, which Expire returns
// once the lease has passed — cancelling the order if it was saved — so a
// crash never leaves units sold to no order, nor an order without units.
func (s *Stock) Buy(ctx context.Context, user string, qty int64) (*Order, error) {
	var lease time.Duration
	if s.orders != nil {
		lease = s.lease
	}
	o, err := s.take(ctx, "buy", user, qty, lease)
	if err != nil {
		return nil, err
	}
	if err := s.commit(ctx, "buy", o); err != nil {
		return nil, err
	}
	return o, nil
}

// Reserve holds qty units for user until ttl has passed (payment flows):
// Confirm makes the purchase, Cancel or expiry (Expire) returns the units.
// The reservation counts against the buyer's limit while it is open.
func (s *Stock) Reserve(ctx context.Context, user string, qty int64, ttl time.Duration) (*Order, error) {
	if ttl <= 0 {
		return nil, s.keyErr("reserve", &lockx.ArgError{Arg: "ttl", Reason: "must be positive"})
	}
	return s.take(ctx, "reserve", user, qty, ttl)
}

func (s *Stock) take(ctx context.Context, op, user string, qty int64, ttl time.Duration) (*Order, error) {
	if err := s.ready(op); err != nil {
		return nil, err
	}
	switch {
	case user == "":
		return nil, s.keyErr(op, &lockx.ArgError{Arg: "user", Reason: "empty"})
	case qty <= 0:
		return nil, s.keyErr(op, &lockx.ArgError{Arg: "quantity", Reason: "must be positive"})
	case s.limit > 0 && qty > s.limit:
		return nil, s.keyErr(op, fmt.Errorf("%w: %d units asked, limit %d", ErrLimit, qty, s.limit))
	}
	now := time.Now()
	if s.soldOutTTL > 0 && now.UnixNano() < s.soldOut.Load() {
		return nil, s.keyErr(op, ErrSoldOut)
	}
	if s.rate != nil && !s.rate.allow(now) {
		return nil, s.keyErr(op, ErrBusy)
	}
	if s.limit > 0 {
		if _, err := s.sb.ClaimQuota(ctx, s.sku, user, qty, s.limit); err != nil {
			if errors.Is(err, driver.ErrQuotaExceeded) {
				err = fmt.Errorf("%w: %w", ErrLimit, err)
			}
			return nil, s.keyErr(op, err)
		}
	}
	o := &Order{ID: newID(), SKU: s.sku, User: user, Qty: qty}
	parts, err := s.deduct(ctx, o.ID, user, qty, ttl)
	if err != nil {
		s.unquota(context.WithoutCancel(ctx), user, qty)
		return nil, s.keyErr(op, err)
	}
	o.Parts = parts
	if ttl > 0 {
		o.Deadline = now.Add(ttl)
	}
	return o, nil
}

// deduct takes qty units into ledger entries of order id: first from a
// random segment; on a miss from a segment that the levels show can serve
// it; and if no single segment can while the SKU as a whole can, by
// gathering from several. It says ErrSoldOut only when the levels, read
// after a miss, add up to less than qty.
func (s *Stock) deduct(ctx context.Context, id, user string, qty int64, ttl time.Duration) ([]Part, error) {
	all := *s.all.Load()
	first := mrand.IntN(len(all))
	p := Part{Seg: first, Qty: qty, Entry: entryID(id, first, 0)}
	err := s.takeOne(ctx, p, user, ttl)
	if err == nil {
		return []Part{p}, nil
	}
	if !errors.Is(err, driver.ErrStockShort) {
		return nil, err
	}
	cands := make([]int, 0, len(all))
	for {
		levels, err := s.sb.StockLevels(ctx, s.sku, all)
		if err != nil {
			return nil, err
		}
		var sum int64
		cands = cands[:0]
		for seg, l := range levels {
			sum += l
			if l >= qty {
				cands = append(cands, seg)
			}
		}
		if sum < qty {
			s.markSoldOut()
			return nil, ErrSoldOut
		}
		if len(cands) == 0 {
			return s.gather(ctx, id, user, qty, ttl)
		}
		off := mrand.IntN(len(cands))
		for j := range cands {
			seg := cands[(off+j)%len(cands)]
			p := Part{Seg: seg, Qty: qty, Entry: entryID(id, seg, 0)}
			err := s.takeOne(ctx, p, user, ttl)
			if err == nil {
				return []Part{p}, nil
			}
			if !errors.Is(err, driver.ErrStockShort) {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// gather takes qty units from several segments, under the SKU's gathering
// lock so that two gatherers cannot each hold part of what one of them
// needs and both give up. Single-segment buyers carry on meanwhile: what
// they take is sold, not held.
func (s *Stock) gather(ctx context.Context, id, user string, qty int64, ttl time.Duration) ([]Part, error) {
	l, err := s.c.Acquire(ctx, "stock/"+s.sku+"/gather", s.lockOpts...)
	if err != nil {
		return nil, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	all := *s.all.Load()
	var parts []Part
	need, n := qty, 0
	fail := func(err error) ([]Part, error) {
		rctx := context.WithoutCancel(ctx)
		for _, p := range parts {
			_ = s.sb.SettleStock(rctx, s.sku, p.Seg, p.Entry, false)
		}
		return nil, err
	}
	for need > 0 {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		levels, err := s.sb.StockLevels(ctx, s.sku, all)
		if err != nil {
			return fail(err)
		}
		var sum int64
		for _, l := range levels {
			sum += l
		}
		if sum < need {
			s.markSoldOut()
			return fail(ErrSoldOut)
		}
		for seg, lv := range levels {
			if lv <= 0 || need == 0 {
				continue
			}
			p := Part{Seg: seg, Qty: min(lv, need), Entry: entryID(id, seg, n)}
			n++
			switch err := s.takeOne(ctx, p, user, ttl); {
			case err == nil:
				parts = append(parts, p)
				need -= p.Qty
			case !errors.Is(err, driver.ErrStockShort):
				return fail(err)
			}
		}
	}
	return parts, nil
}

// takeOne takes part p in one segment: one atomic step (LockFree), or under
// the segment's lock a read and a compare-and-swap write (Locked).
func (s *Stock) takeOne(ctx context.Context, p Part, user string, ttl time.Duration) error {
	t := driver.StockTake{SKU: s.sku, Seg: p.Seg, ID: p.Entry, User: user, Qty: p.Qty, TTL: ttl}
	if s.mode == Locked {
		// Look before queueing for the lock: a segment that cannot serve
		// the part is not worth the wait: one read is cheaper than a queue
		// turn that ends in ErrStockShort anyway.
		lv, err := s.sb.StockLevels(ctx, s.sku, []int{p.Seg})
		if err != nil {
			return err
		}
		if lv[0] < p.Qty {
			return driver.ErrStockShort
		}
		l, err := s.c.Acquire(ctx, "stock/"+s.sku+"/"+strconv.Itoa(p.Seg), s.lockOpts...)
		if err != nil {
			return err
		}
		defer l.Release(context.WithoutCancel(ctx))
		lv, err = s.sb.StockLevels(ctx, s.sku, []int{p.Seg})
		if err != nil {
			return err
		}
		if lv[0] < p.Qty {
			return driver.ErrStockShort
		}
		t.Expect = lv[0]
	}
	_, err := s.sb.TakeStock(ctx, t)
	if err != nil && errors.Is(err, lockx.ErrUnavailable) {
		// The outcome is unknown: undo a take that may have happened.
		_ = s.sb.SettleStock(context.WithoutCancel(ctx), s.sku, p.Seg, p.Entry, false)
	}
	return err
}

// persist saves a confirmed order. If that fails the units go back — after
// the order is known not to be stored: a save whose reply was lost may have
// committed, so it is cancelled first, and if even that fails the units
// stay held (reconciliation shows them; they are never sold twice).
func (s *Stock) persist(ctx context.Context, o *Order) error {
	if s.orders == nil {
		return nil
	}
	err := s.orders.SaveOrder(ctx, driver.StockOrder{ID: o.ID, SKU: o.SKU, User: o.User, Qty: o.Qty, Unique: s.limit == 1})
	if err == nil {
		return nil
	}
	rctx := context.WithoutCancel(ctx)
	// A duplicate or a save beyond the supply is a definite refusal: nothing
	// was saved. Any other error may hide a save that committed.
	refused := errors.Is(err, driver.ErrDuplicateOrder) || errors.Is(err, driver.ErrSupplyExceeded)
	if !refused {
		if cerr := s.orders.CancelOrder(rctx, o.SKU, o.ID); cerr != nil {
			return fmt.Errorf("stock: persisting order %s: %w (units kept held: %w)", o.ID, err, cerr)
		}
	}
	s.unquota(rctx, o.User, s.releaseParts(rctx, o))
	switch {
	case errors.Is(err, driver.ErrDuplicateOrder):
		return fmt.Errorf("%w: %w", ErrLimit, err)
	case errors.Is(err, driver.ErrSupplyExceeded):
		s.markSoldOut()
		return fmt.Errorf("%w: %w", ErrSoldOut, err)
	}
	return fmt.Errorf("stock: persisting order %s: %w", o.ID, err)
}

// Confirm turns a reservation into a purchase (and persists it, with
// WithOrders). A reservation that expired is ErrExpired, and any part of it
// still held is returned. Confirming a confirmed order is a no-op.
func (s *Stock) Confirm(ctx context.Context, o *Order) error {
	if err := s.ready("confirm"); err != nil {
		return err
	}
	if o == nil || o.SKU != s.sku {
		return s.keyErr("confirm", &lockx.ArgError{Arg: "order", Reason: "nil or of another SKU"})
	}
	return s.commit(ctx, "confirm", o)
}

// commit saves o (with an order store) and then confirms its units: the
// order is saved first, so that a crash between the two leaves a
// reservation for Expire to resolve, never confirmed units without an
// order. A part that expired meanwhile voids the purchase: the order is
// cancelled and whatever is still held goes back (ErrExpired).
func (s *Stock) commit(ctx context.Context, op string, o *Order) error {
	if err := s.persist(ctx, o); err != nil {
		return s.keyErr(op, err)
	}
	for _, p := range o.Parts {
		err := s.sb.SettleStock(ctx, s.sku, p.Seg, p.Entry, true)
		if errors.Is(err, driver.ErrNoStockEntry) {
			rctx := context.WithoutCancel(ctx)
			var cerr error
			if s.orders != nil {
				cerr = s.orders.CancelOrder(rctx, o.SKU, o.ID)
			}
			s.unquota(rctx, o.User, s.releaseParts(rctx, o))
			s.soldOut.Store(0)
			if cerr != nil {
				return s.keyErr(op, fmt.Errorf("%w (and its order %s not cancelled: %w)", ErrExpired, o.ID, cerr))
			}
			return s.keyErr(op, ErrExpired)
		}
		if err != nil {
			// Unknown outcome: the entry stays a reservation until the
			// lease; Expire then returns it and cancels the order.
			return s.keyErr(op, err)
		}
	}
	o.Deadline = time.Time{}
	return nil
}

// Cancel cancels a purchase or a reservation: the durable order (if any) is
// cancelled first, then the units return to their segments and the buyer's
// quota is given back. Cancelling twice, or after expiry, returns nothing
// twice.
func (s *Stock) Cancel(ctx context.Context, o *Order) error {
	if err := s.ready("cancel"); err != nil {
		return err
	}
	if o == nil || o.SKU != s.sku {
		return s.keyErr("cancel", &lockx.ArgError{Arg: "order", Reason: "nil or of another SKU"})
	}
	if s.orders != nil {
		if err := s.orders.CancelOrder(ctx, o.SKU, o.ID); err != nil {
			return s.keyErr("cancel", err)
		}
	}
	s.unquota(ctx, o.User, s.releaseParts(ctx, o))
	s.soldOut.Store(0)
	return nil
}

// releaseParts returns o's parts that are still held and reports how many
// units this call returned.
func (s *Stock) releaseParts(ctx context.Context, o *Order) int64 {
	var n int64
	for _, p := range o.Parts {
		if s.sb.SettleStock(ctx, s.sku, p.Seg, p.Entry, false) == nil {
			n += p.Qty
		}
	}
	return n
}

func (s *Stock) unquota(ctx context.Context, user string, n int64) {
	if s.limit > 0 && n > 0 {
		_, _ = s.sb.ClaimQuota(ctx, s.sku, user, -n, 0)
	}
}

func (s *Stock) markSoldOut() {
	if s.soldOutTTL > 0 {
		s.soldOut.Store(time.Now().Add(s.soldOutTTL).UnixNano())
	}
}

// Expire returns the units of every reservation whose deadline has passed
// (by the backend's clock), gives the buyers' quota back and, with an order
// store, cancels the order of each (a purchase whose process died before it
// confirmed its units; an unsaved order is a no-op). It reports the units
// returned. Call it periodically — from one process or many, each
// expired reservation is returned once.
func (s *Stock) Expire(ctx context.Context) (int64, error) {
	if err := s.ready("expire"); err != nil {
		return 0, err
	}
	const batch = 256
	var n int64
	for _, seg := range *s.all.Load() {
		for {
			es, err := s.sb.ExpireStock(ctx, s.sku, seg, batch)
			if err != nil {
				return n, s.keyErr("expire", err)
			}
			for _, e := range es {
				n += e.Qty
				s.unquota(ctx, e.User, e.Qty)
				// A purchase whose process died after saving its order and
				// before confirming: the purchase is void.
				if s.orders != nil {
					order, _, _ := strings.Cut(e.ID, "/")
					if err := s.orders.CancelOrder(ctx, s.sku, order); err != nil {
						return n, s.keyErr("expire", fmt.Errorf("units of order %s returned, the order not cancelled: %w", order, err))
					}
				}
			}
			if len(es) < batch {
				break
			}
		}
	}
	if n > 0 {
		s.soldOut.Store(0)
	}
	return n, nil
}

// Restock adds n units, spread evenly over the segments, and then (with a
// supply cap) to the order store's cap: the ledger first, so that the cap
// never exceeds what the ledger was given — until the cap is raised, a
// buyer of a new unit is refused (ErrSoldOut), never oversold. If the
// ledger takes only part of n before an error, the cap is raised by that
// part; if raising the cap fails, Reconcile shows the cap below the
// supply (Report.Cap), and driver.SupplyCap.AddSupply on the store
// corrects it.
func (s *Stock) Restock(ctx context.Context, n int64) error {
	if err := s.ready("restock"); err != nil {
		return err
	}
	if n <= 0 {
		return s.keyErr("restock", &lockx.ArgError{Arg: "units", Reason: "must be positive"})
	}
	// Start at a random segment so that small restocks do not always fill
	// the same ones.
	all := *s.all.Load()
	off := mrand.IntN(len(all))
	var added int64
	var err error
	for i, l := range spread(n, len(all)) {
		if l == 0 {
			continue
		}
		if _, err = s.sb.AddStock(ctx, s.sku, all[(off+i)%len(all)], l); err != nil {
			break
		}
		added += l
	}
	if s.supply != nil && added > 0 {
		// A SKU without a cap (ErrNoStock) stays uncapped.
		if _, cerr := s.supply.AddSupply(context.WithoutCancel(ctx), s.sku, added); cerr != nil && !errors.Is(cerr, driver.ErrNoStock) {
			err = errors.Join(err, fmt.Errorf("stock: %d units restocked, the supply cap not raised: %w", added, cerr))
		}
	}
	if err != nil {
		return s.keyErr("restock", err)
	}
	s.soldOut.Store(0)
	return nil
}

// Available returns the units available now, summed over the segments.
func (s *Stock) Available(ctx context.Context) (int64, error) {
	if err := s.ready("available"); err != nil {
		return 0, err
	}
	levels, err := s.sb.StockLevels(ctx, s.sku, *s.all.Load())
	if err != nil {
		return 0, s.keyErr("available", err)
	}
	var sum int64
	for _, l := range levels {
		sum += l
	}
	return sum, nil
}

func entryID(order string, seg, n int) string {
	return order + "/" + strconv.Itoa(seg) + "." + strconv.Itoa(n)
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
