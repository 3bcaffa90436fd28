package memlock

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// StockStore is an in-process driver.StockBackend: segmented inventory
// counters with their ledgers and per-user quotas in maps, under one mutex.
// It is for single-process programs and tests. The zero value is ready to
// use and safe for concurrent use.
type StockStore struct {
	mu     sync.Mutex
	skus   map[string][]*memSegment
	quotas map[[2]string]int64
	now    func() time.Time // nil: time.Now
}

type memSegment struct {
	level, supplied int64
	entries         map[string]driver.StockEntry
}

// NewStockStore returns an empty in-process stock store.
func NewStockStore() *StockStore { return &StockStore{} }

var (
	_ driver.StockBackend = (*StockStore)(nil)
	_ driver.StockBackend = (*Backend)(nil)
)

func (s *StockStore) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// segment returns segment seg of sku, or an error. Callers hold s.mu.
func (s *StockStore) segment(sku string, seg int) (*memSegment, error) {
	if err := driver.CheckStockArgs(sku, seg); err != nil {
		return nil, err
	}
	segs, ok := s.skus[sku]
	if !ok {
		return nil, driver.ErrNoStock
	}
	if seg >= len(segs) {
		return nil, &driver.ArgError{Arg: "segment", Reason: "beyond the SKU's segment count"}
	}
	return segs[seg], nil
}

// InitStock implements driver.StockBackend.
func (s *StockStore) InitStock(ctx context.Context, sku string, levels []int64) (int, bool, error) {
	if err := driver.CheckStockArgs(sku, len(levels)-1); err != nil {
		return 0, false, err
	}
	for _, l := range levels {
		if l < 0 {
			return 0, false, &driver.ArgError{Arg: "level", Reason: "must not be negative"}
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if segs, ok := s.skus[sku]; ok {
		return len(segs), false, nil
	}
	if s.skus == nil {
		s.skus = make(map[string][]*memSegment)
	}
	segs := make([]*memSegment, len(levels))
	for i, l := range levels {
		segs[i] = &memSegment{level: l, supplied: l, entries: make(map[string]driver.StockEntry)}
	}
	s.skus[sku] = segs
	return len(segs), true, nil
}

// StockLevels implements driver.StockBackend.
func (s *StockStore) StockLevels(ctx context.Context, sku string, segs []int) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int64, len(segs))
	for i, seg := range segs {
		sg, err := s.segment(sku, seg)
		if err != nil {
			return nil, err
		}
		out[i] = sg.level
	}
	return out, nil
}

// TakeStock implements driver.StockBackend.
func (s *StockStore) TakeStock(ctx context.Context, t driver.StockTake) (int64, error) {
	if err := driver.CheckStockTake(t); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, err := s.segment(t.SKU, t.Seg)
	if err != nil {
		return 0, err
	}
	if _, dup := sg.entries[t.ID]; dup {
		return sg.level, nil
	}
	if sg.level < t.Qty || (t.Expect > 0 && sg.level != t.Expect) {
		return sg.level, driver.ErrStockShort
	}
	e := driver.StockEntry{ID: t.ID, User: t.User, Qty: t.Qty}
	if t.TTL > 0 {
		e.Deadline = s.clock().Add(t.TTL)
	}
	sg.level -= t.Qty
	sg.entries[t.ID] = e
	return sg.level, nil
}

// SettleStock implements driver.StockBackend.
func (s *StockStore) SettleStock(ctx context.Context, sku string, seg int, id string, confirm bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, err := s.segment(sku, seg)
	if err != nil {
		return err
	}
	e, ok := sg.entries[id]
	if !ok {
		return driver.ErrNoStockEntry
	}
	if !confirm {
		delete(sg.entries, id)
		sg.level += e.Qty
		return nil
	}
	if !e.Deadline.IsZero() && !s.clock().Before(e.Deadline) {
		return driver.ErrNoStockEntry // expired: ExpireStock removes it
	}
	e.Deadline = time.Time{}
	sg.entries[id] = e
	return nil
}

// AddStock implements driver.StockBackend.
func (s *StockStore) AddStock(ctx context.Context, sku string, seg int, n int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, err := s.segment(sku, seg)
	if err != nil {
		return 0, err
	}
	if sg.level+n < 0 {
		return sg.level, driver.ErrStockShort
	}
	sg.level += n
	sg.supplied += n
	return sg.level, nil
}

// ExpireStock implements driver.StockBackend.
func (s *StockStore) ExpireStock(ctx context.Context, sku string, seg int, max int) ([]driver.StockEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, err := s.segment(sku, seg)
	if err != nil {
		return nil, err
	}
	now := s.clock()
	var out []driver.StockEntry
	for id, e := range sg.entries {
		if len(out) >= max {
			break
		}
		if !e.Deadline.IsZero() && !now.Before(e.Deadline) {
			delete(sg.entries, id)
			sg.level += e.Qty
			out = append(out, e)
		}
	}
	return out, nil
}

// StockSegment implements driver.StockBackend. Entries are sorted by ID.
func (s *StockStore) StockSegment(ctx context.Context, sku string, seg int) (driver.StockSegment, error) {
	if err := ctx.Err(); err != nil {
		return driver.StockSegment{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, err := s.segment(sku, seg)
	if err != nil {
		return driver.StockSegment{}, err
	}
	out := driver.StockSegment{Level: sg.level, Supplied: sg.supplied, Entries: make([]driver.StockEntry, 0, len(sg.entries))}
	for _, e := range sg.entries {
		out.Entries = append(out.Entries, e)
	}
	sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].ID < out.Entries[j].ID })
	return out, nil
}

// ClaimQuota implements driver.StockBackend.
func (s *StockStore) ClaimQuota(ctx context.Context, sku, user string, delta, limit int64) (int64, error) {
	if err := skuCall(ctx, sku); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{sku, user}
	n := s.quotas[k]
	if delta > 0 && limit > 0 && n+delta > limit {
		return n, driver.ErrQuotaExceeded
	}
	n = max(n+delta, 0)
	if s.quotas == nil {
		s.quotas = make(map[[2]string]int64)
	}
	if n == 0 {
		delete(s.quotas, k)
	} else {
		s.quotas[k] = n
	}
	return n, nil
}

// skuCall checks the arguments of a call on a whole SKU, and ctx.
func skuCall(ctx context.Context, sku string) error {
	if err := driver.CheckStockArgs(sku, 0); err != nil {
		return err
	}
	return ctx.Err()
}

// OrderStore is an in-process driver.OrderStore and driver.SupplyCap, for
// tests and single-process programs. The zero value is ready to use and
// safe for concurrent use.
type OrderStore struct {
	mu     sync.Mutex
	orders map[string]driver.StockOrder // by SKU + "\x00" + ID; live orders only
	unique map[[2]string]string         // (SKU, User) → ID of the live Unique order
	caps   map[string]*supplyCap        // by SKU; none: not capped
}

// supplyCap is a SKU's cap: units supplied and units of live orders.
type supplyCap struct{ supplied, ordered int64 }

var (
	_ driver.OrderStore = (*OrderStore)(nil)
	_ driver.SupplyCap  = (*OrderStore)(nil)
)

// NewOrderStore returns an empty in-process order store.
func NewOrderStore() *OrderStore { return &OrderStore{} }

// SaveOrder implements driver.OrderStore and, for a SKU with a cap,
// driver.SupplyCap's refusal of an order beyond the supply.
func (s *OrderStore) SaveOrder(ctx context.Context, o driver.StockOrder) error {
	if err := driver.CheckStockOrder(o); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := o.SKU + "\x00" + o.ID
	if _, ok := s.orders[k]; ok {
		return nil
	}
	if s.orders == nil {
		s.orders, s.unique = make(map[string]driver.StockOrder), make(map[[2]string]string)
	}
	uk := [2]string{o.SKU, o.User}
	if _, taken := s.unique[uk]; o.Unique && taken {
		return driver.ErrDuplicateOrder
	}
	c := s.caps[o.SKU]
	if c != nil && c.ordered+o.Qty > c.supplied {
		return fmt.Errorf("%w: %d units ordered of %d, %d more asked", driver.ErrSupplyExceeded, c.ordered, c.supplied, o.Qty)
	}
	if c != nil {
		c.ordered += o.Qty
	}
	if o.Unique {
		s.unique[uk] = o.ID
	}
	s.orders[k] = o
	return nil
}

// CancelOrder implements driver.OrderStore.
func (s *OrderStore) CancelOrder(ctx context.Context, sku, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sku + "\x00" + id
	o, ok := s.orders[k]
	if !ok {
		return nil
	}
	delete(s.orders, k)
	if uk := [2]string{o.SKU, o.User}; o.Unique && s.unique[uk] == o.ID {
		delete(s.unique, uk)
	}
	if c := s.caps[sku]; c != nil {
		c.ordered -= o.Qty
	}
	return nil
}

// OrderedUnits implements driver.OrderStore.
func (s *OrderStore) OrderedUnits(ctx context.Context, sku string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orderedLocked(sku), nil
}

// orderedLocked sums the units of sku's live orders. Callers hold s.mu.
func (s *OrderStore) orderedLocked(sku string) int64 {
	var n int64
	for _, o := range s.orders {
		if o.SKU == sku {
			n += o.Qty
		}
	}
	return n
}

// InitSupply implements driver.SupplyCap.
func (s *OrderStore) InitSupply(ctx context.Context, sku string, supplied int64) (bool, error) {
	if err := skuCall(ctx, sku); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caps[sku] != nil {
		return false, nil
	}
	ordered := s.orderedLocked(sku)
	if ordered > supplied {
		return false, fmt.Errorf("%w: %d units in live orders, supply %d", driver.ErrSupplyExceeded, ordered, supplied)
	}
	if s.caps == nil {
		s.caps = make(map[string]*supplyCap)
	}
	s.caps[sku] = &supplyCap{supplied: supplied, ordered: ordered}
	return true, nil
}

// AddSupply implements driver.SupplyCap.
func (s *OrderStore) AddSupply(ctx context.Context, sku string, delta int64) (int64, error) {
	if err := skuCall(ctx, sku); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.caps[sku]
	switch {
	case c == nil:
		return 0, driver.ErrNoStock
	case c.ordered > c.supplied+delta:
		return c.supplied, fmt.Errorf("%w: %d units in live orders, supply %d", driver.ErrSupplyExceeded, c.ordered, c.supplied+delta)
	}
	c.supplied += delta
	return c.supplied, nil
}

// Supply implements driver.SupplyCap.
func (s *OrderStore) Supply(ctx context.Context, sku string) (supplied, ordered int64, err error) {
	if err := skuCall(ctx, sku); err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.caps[sku]
	if c == nil {
		return 0, 0, driver.ErrNoStock
	}
	return c.supplied, c.ordered, nil
}

// InitStock implements driver.StockBackend on the backend's own stock state,
// so that lockx.New(memlock.New()) serves patterns/stock in both modes. The
// stock of a Backend lives as long as the Backend does.
func (b *Backend) InitStock(ctx context.Context, sku string, levels []int64) (int, bool, error) {
	return b.stockStore().InitStock(ctx, sku, levels)
}

// StockLevels implements driver.StockBackend; see InitStock.
func (b *Backend) StockLevels(ctx context.Context, sku string, segs []int) ([]int64, error) {
	return b.stockStore().StockLevels(ctx, sku, segs)
}

// TakeStock implements driver.StockBackend; see InitStock.
func (b *Backend) TakeStock(ctx context.Context, t driver.StockTake) (int64, error) {
	return b.stockStore().TakeStock(ctx, t)
}

// SettleStock implements driver.StockBackend; see InitStock.
func (b *Backend) SettleStock(ctx context.Context, sku string, seg int, id string, confirm bool) error {
	return b.stockStore().SettleStock(ctx, sku, seg, id, confirm)
}

// AddStock implements driver.StockBackend; see InitStock.
func (b *Backend) AddStock(ctx context.Context, sku string, seg int, n int64) (int64, error) {
	return b.stockStore().AddStock(ctx, sku, seg, n)
}

// ExpireStock implements driver.StockBackend; see InitStock.
func (b *Backend) ExpireStock(ctx context.Context, sku string, seg int, max int) ([]driver.StockEntry, error) {
	return b.stockStore().ExpireStock(ctx, sku, seg, max)
}

// StockSegment implements driver.StockBackend; see InitStock.
func (b *Backend) StockSegment(ctx context.Context, sku string, seg int) (driver.StockSegment, error) {
	return b.stockStore().StockSegment(ctx, sku, seg)
}

// ClaimQuota implements driver.StockBackend; see InitStock.
func (b *Backend) ClaimQuota(ctx context.Context, sku, user string, delta, limit int64) (int64, error) {
	return b.stockStore().ClaimQuota(ctx, sku, user, delta, limit)
}

// stockStore returns the Backend's stock state, made on first use.
func (b *Backend) stockStore() *StockStore {
	b.sideMu.Lock()
	defer b.sideMu.Unlock()
	if b.stock == nil {
		b.stock = &StockStore{now: b.now}
	}
	return b.stock
}
