package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Inventory in lockx is split the way the other pattern capabilities are:
// this file holds the small storage contract a backend implements
// (StockBackend, and OrderStore for durable orders); the flash-sale
// machinery — segment choice, probing, gathering across segments, per-user
// limits, reservations, reconciliation — lives once in patterns/stock.
//
// One SKU's units are split into K segments. Every StockBackend operation
// touches one segment only, so on Redis Cluster each segment may live in its
// own slot and the segments of a hot SKU spread over the nodes. Each segment
// keeps a ledger: one entry per unit-holding order part, confirmed or
// reserved until a deadline. Because units only ever leave a segment into
// its own ledger and come back from it, every segment keeps the invariant
//
//	Level + Σ ledger quantities = Supplied
//
// on its own, in every atomic step, without any cross-segment transaction.

// Verdicts of a StockBackend. Test for them with errors.Is.
var (
	// ErrStockShort reports a take refused because the segment holds fewer
	// units than asked for (or, with StockTake.Expect, not exactly Expect).
	ErrStockShort = errors.New("lockx: not enough stock in segment")
	// ErrNoStock reports an operation on a SKU that was never initialised.
	ErrNoStock = errors.New("lockx: no such stock")
	// ErrNoStockEntry reports a settlement of a ledger entry that is not
	// there: settled before, or a reservation that expired (its units went
	// back to the segment).
	ErrNoStockEntry = errors.New("lockx: no such stock entry")
	// ErrQuotaExceeded reports a per-user claim that would exceed the limit.
	ErrQuotaExceeded = errors.New("lockx: purchase limit reached")
	// ErrDuplicateOrder reports an order refused by an OrderStore because a
	// different order already holds its unique slot (the buyer's one order
	// of the SKU).
	ErrDuplicateOrder = errors.New("lockx: duplicate order")
	// ErrSupplyExceeded reports an order refused by an OrderStore that caps
	// its SKU's live orders (SupplyCap): saving it would put more units in
	// live orders than the SKU's supply. It also reports a withdrawal
	// (SupplyCap.AddSupply) or a cap (InitSupply) below the units already
	// in live orders.
	ErrSupplyExceeded = errors.New("lockx: orders would exceed the supply")
)

// StockTake is one atomic deduction from one segment.
type StockTake struct {
	SKU string
	Seg int    // segment index, 0 ≤ Seg < K
	ID  string // ledger entry id, unique per SKU; a repeat with the same ID is a no-op success
	// User is recorded with the entry, so an expired reservation can give
	// the buyer's quota back.
	User string
	Qty  int64 // units, ≥ 1
	// Expect, if positive, makes the take conditional on the segment
	// holding exactly Expect units: a compare-and-swap for callers that
	// read the level under a segment lock and write it back (lock-based
	// mode). Zero means no expectation; a level of zero can never satisfy a
	// take anyway.
	Expect int64
	// TTL, if positive, makes the entry a reservation that expires TTL
	// after the take (by the store's clock) unless confirmed.
	TTL time.Duration
}

// StockEntry is one ledger entry of a segment.
type StockEntry struct {
	ID   string
	User string
	Qty  int64
	// Deadline is when a reservation expires; zero for a confirmed entry.
	Deadline time.Time
}

// StockSegment is an atomic snapshot of one segment.
type StockSegment struct {
	Level    int64 // units available
	Supplied int64 // units ever put in: initial level plus restocks
	Entries  []StockEntry
}

// Balanced reports whether the segment's invariant holds:
// Level + Σ Entries.Qty == Supplied.
func (s StockSegment) Balanced() bool {
	sum := s.Level
	for _, e := range s.Entries {
		sum += e.Qty
	}
	return sum == s.Supplied
}

// StockBackend is the optional capability of a Backend that keeps segmented
// inventory counters (patterns/stock). Find it with As:
//
//	var sb driver.StockBackend
//	ok := driver.As(client.Backend(), &sb)
//
// Every method is one atomic step on one segment (InitStock on the SKU's
// segment table), so a backend may put each segment on a different shard.
// Errors other than the verdicts above match ErrUnavailable: the outcome is
// unknown, and callers retry with the same entry ID.
type StockBackend interface {
	// InitStock creates sku with one segment per element of levels, unless
	// it exists; it returns the SKU's segment count (len(levels) if it
	// created it) and whether it did. Existing stock is never reset.
	InitStock(ctx context.Context, sku string, levels []int64) (segs int, created bool, err error)
	// StockLevels returns the units available in each listed segment, in
	// order. The reads need not be one atomic snapshot across segments.
	StockLevels(ctx context.Context, sku string, segs []int) ([]int64, error)
	// TakeStock moves t.Qty units from the segment into a new ledger entry
	// t.ID if the segment holds at least t.Qty (and exactly t.Expect, if
	// set), and returns the level after the take. A refusal returns
	// ErrStockShort with the current level. A take whose ID is already in
	// the ledger succeeds without change (a retry after a lost reply).
	TakeStock(ctx context.Context, t StockTake) (level int64, err error)
	// SettleStock confirms entry id of segment seg (it stays, without
	// deadline: the units are sold) or, with confirm false, removes it and
	// returns its units to the segment (cancellation). Confirming a confirmed
	// entry is a no-op. A missing entry is ErrNoStockEntry, and so is the
	// confirmation of an expired reservation: that entry is left for
	// ExpireStock, so that exactly one caller — the one that removed an
	// entry — gives its units and its buyer's quota back.
	SettleStock(ctx context.Context, sku string, seg int, id string, confirm bool) error
	// AddStock adds n units (restock; negative n withdraws unsold units) to
	// the segment and to its Supplied count, and returns the new level. A
	// withdrawal of more than the level is ErrStockShort.
	AddStock(ctx context.Context, sku string, seg int, n int64) (level int64, err error)
	// ExpireStock removes up to max reservations of the segment whose
	// deadline has passed by the store's clock, returns their units to the
	// segment and returns the removed entries.
	ExpireStock(ctx context.Context, sku string, seg int, max int) ([]StockEntry, error)
	// StockSegment returns an atomic snapshot of the segment.
	StockSegment(ctx context.Context, sku string, seg int) (StockSegment, error)
	// ClaimQuota adds delta to user's purchase count for sku if the result
	// stays within limit (limit ≤ 0: no limit), and returns the new count.
	// A claim past the limit is ErrQuotaExceeded with the current count. A
	// negative delta returns quota; the count never drops below zero.
	ClaimQuota(ctx context.Context, sku, user string, delta, limit int64) (int64, error)
}

// StockOrder is a durable order record (OrderStore).
type StockOrder struct {
	ID   string
	SKU  string
	User string
	Qty  int64
	// Unique makes the store refuse a second live order of the same (SKU,
	// User) with ErrDuplicateOrder: the one-order-per-buyer rule enforced by
	// a unique constraint, independent of the quota counters.
	Unique bool
}

// OrderStore persists orders (pglock.OrderStore). SaveOrder is idempotent
// per order ID: saving the same ID again succeeds. A second live Unique
// order of the same (SKU, User) is ErrDuplicateOrder. CancelOrder marks the
// order cancelled, freeing its unique slot; cancelling an unknown or
// cancelled order is a no-op. OrderedUnits sums the units of sku's live
// orders, for reconciliation.
type OrderStore interface {
	SaveOrder(ctx context.Context, o StockOrder) error
	CancelOrder(ctx context.Context, sku, id string) error
	OrderedUnits(ctx context.Context, sku string) (int64, error)
}

// SupplyCap is the optional capability of an OrderStore that caps, per SKU,
// the units of live orders at the units supplied, in the store itself
// (pglock.OrderStore: a CHECK (ordered <= supplied) on one row per SKU). It
// is the last line against an oversell when the ledger is a store that may
// lose acknowledged writes: after a Redis failover the lost entries' units
// look available again, and the cap refuses the orders that would sell
// them a second time. patterns/stock finds it with a type assertion on the
// OrderStore given to WithOrders.
//
// A SKU without a cap (no InitSupply yet: orders saved before the cap
// existed, or a store used without patterns/stock) is not capped; once it
// has one, SaveOrder of a new order adds its units to the SKU's ordered
// count in the same atomic step as the save, and refuses with
// ErrSupplyExceeded, saving nothing, an order that would take the count
// past the supply. A repeated save of a saved order changes nothing.
// CancelOrder takes the units off the count on the live → cancelled
// transition only.
//
// The ledger and the cap are two stores with no transaction across them,
// so their updates are ordered so that the cap is never below the units
// legitimately sold: a restock adds to the ledger first and to the cap
// after (a buyer of a new unit may be refused until the cap catches up),
// and a withdrawal lowers the cap first and the ledger after. Either way
// the cap may lag behind the ledger, and a lagging cap refuses, never
// oversells.
type SupplyCap interface {
	// InitSupply gives sku a cap of supplied units, counting the units of
	// its live orders already saved, unless it has one; it reports
	// whether it created it. A cap below those units is ErrSupplyExceeded
	// (the SKU is oversold already), and no cap is created.
	InitSupply(ctx context.Context, sku string, supplied int64) (created bool, err error)
	// AddSupply adds delta to sku's cap (negative delta: a withdrawal) and
	// returns the new cap. A withdrawal below the units of live orders is
	// ErrSupplyExceeded; a SKU without a cap is ErrNoStock.
	AddSupply(ctx context.Context, sku string, delta int64) (supplied int64, err error)
	// Supply returns sku's cap and the units of live orders it counts; a
	// SKU without a cap is ErrNoStock.
	Supply(ctx context.Context, sku string) (supplied, ordered int64, err error)
}

// CheckStockArgs validates the arguments common to StockBackend methods:
// a non-empty SKU of at most MaxKeyLen bytes and a segment index in
// [0, 1<<16). Implementations call it first so that every backend refuses
// the same input with the same *ArgError.
func CheckStockArgs(sku string, seg int) error {
	switch {
	case sku == "":
		return &ArgError{Arg: "sku", Reason: "empty"}
	case len(sku) > MaxKeyLen:
		return &ArgError{Arg: "sku", Reason: fmt.Sprintf("%d bytes, longer than the maximum %d", len(sku), MaxKeyLen)}
	case seg < 0 || seg >= MaxStockSegments:
		return &ArgError{Arg: "segment", Reason: fmt.Sprintf("%d out of range [0, %d)", seg, MaxStockSegments)}
	}
	return nil
}

// CheckStockTake validates a StockTake (CheckStockArgs, a non-empty ID, a
// positive quantity, non-negative Expect and TTL).
func CheckStockTake(t StockTake) error {
	if err := CheckStockArgs(t.SKU, t.Seg); err != nil {
		return err
	}
	switch {
	case t.ID == "":
		return &ArgError{Arg: "entry id", Reason: "empty"}
	case t.Qty <= 0:
		return &ArgError{Arg: "quantity", Reason: "must be positive"}
	case t.Expect < 0:
		return &ArgError{Arg: "expect", Reason: "must not be negative"}
	case t.TTL < 0:
		return &ArgError{Arg: "ttl", Reason: "must not be negative"}
	}
	return nil
}

// CheckStockOrder validates an order given to OrderStore.SaveOrder: a
// valid SKU (CheckStockArgs), a non-empty ID and a positive quantity.
func CheckStockOrder(o StockOrder) error {
	if err := CheckStockArgs(o.SKU, 0); err != nil {
		return err
	}
	switch {
	case o.ID == "":
		return &ArgError{Arg: "order id", Reason: "empty"}
	case o.Qty <= 0:
		return &ArgError{Arg: "quantity", Reason: "must be positive"}
	}
	return nil
}

// MaxStockSegments bounds the segment count of one SKU.
const MaxStockSegments = 1 << 16
