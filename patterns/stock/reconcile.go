package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockx-go/lockx/lockx/driver"
)

// ErrUnbalanced reports a reconciliation that found units unaccounted for.
var ErrUnbalanced = errors.New("stock: reconciliation failed")

// Report is the result of Reconcile: where every unit of the SKU is.
type Report struct {
	Supplied  int64 // units ever put in: initial stock plus restocks
	Available int64 // units in the segments
	Confirmed int64 // units of confirmed orders
	Reserved  int64 // units of open (or expired, not yet returned) reservations
	// Ordered is the units of live orders in the order store (WithOrders),
	// -1 without one. Once no purchase is in flight it equals Confirmed
	// (OrdersMatch).
	Ordered int64
	// Cap is the order store's supply cap (driver.SupplyCap): the units it
	// accepts in live orders; -1 without a cap. It equals Supplied unless a
	// Restock failed half-way.
	Cap int64
	// Unbalanced lists the segments whose own invariant failed.
	Unbalanced []int
	// OverLimit lists the buyers holding more units than the limit.
	OverLimit []string
}

// OrdersMatch reports whether the order store agrees with the ledger: the
// units of live orders equal the confirmed units (always true without an
// order store). It is the verdict to read once no purchase is in flight — a
// purchase saves its order before it confirms its units — and to alert on:
// Ordered > Confirmed means orders whose units the ledger does not hold (a
// Redis failover that lost confirmed entries: without WithSupplyCap those
// units may be sold again; with it, see Unsellable), Ordered < Confirmed
// means units sold to no order.
func (r Report) OrdersMatch() bool { return r.Ordered < 0 || r.Ordered == r.Confirmed }

// Unsellable returns the units the ledger shows available that the supply
// cap will refuse: Available beyond Cap − Ordered, 0 without a cap. It is
// what a ledger that lost confirmed entries (a Redis failover) has put
// back: every buyer that takes one of those units is refused by the order
// store (ErrSoldOut) and gives it back, so they are never sold twice, but
// Available overstates the stock by this much. Orders in flight only make
// it smaller (their units are reserved, not available), so it is safe to
// read mid-sale. To make Available agree, withdraw them from the ledger
// alone (driver.StockBackend's AddStock with a negative count); the cap
// already counts them as sold.
func (r Report) Unsellable() int64 {
	if r.Cap < 0 || r.Ordered < 0 {
		return 0
	}
	return max(r.Available-(r.Cap-r.Ordered), 0)
}

// Balanced reports whether Available + Confirmed + Reserved == Supplied in
// every segment and in total, and no buyer is over the limit.
func (r Report) Balanced() bool {
	return len(r.Unbalanced) == 0 && len(r.OverLimit) == 0 && r.Available+r.Confirmed+r.Reserved == r.Supplied
}

// Reconcile reads every segment's atomic snapshot and checks the invariant
//
//	Available + Confirmed + Reserved = Supplied
//
// per segment and in total. Each segment's snapshot is one atomic step, and
// units never move between segments (orders that span segments hold a part
// in each), so the check is exact at any moment, even under load. It also
// counts each buyer's units across segments against the limit, and reads
// the order store's total. An imbalance is reported in the Report and as an
// error matching ErrUnbalanced.
func (s *Stock) Reconcile(ctx context.Context) (Report, error) {
	r := Report{Ordered: -1, Cap: -1}
	if err := s.ready("reconcile"); err != nil {
		return r, err
	}
	perUser := make(map[string]int64)
	for _, seg := range *s.all.Load() {
		sn, err := s.sb.StockSegment(ctx, s.sku, seg)
		if err != nil {
			return r, s.keyErr("reconcile", err)
		}
		if !sn.Balanced() {
			r.Unbalanced = append(r.Unbalanced, seg)
		}
		r.Supplied += sn.Supplied
		r.Available += sn.Level
		for _, e := range sn.Entries {
			if e.Deadline.IsZero() {
				r.Confirmed += e.Qty
			} else {
				r.Reserved += e.Qty
			}
			perUser[e.User] += e.Qty
		}
	}
	if s.limit > 0 {
		for u, n := range perUser {
			if n > s.limit {
				r.OverLimit = append(r.OverLimit, u)
			}
		}
	}
	if s.orders != nil {
		n, err := s.orders.OrderedUnits(ctx, s.sku)
		if err != nil {
			return r, s.keyErr("reconcile", err)
		}
		r.Ordered = n
	}
	if s.supply != nil {
		c, _, err := s.supply.Supply(ctx, s.sku)
		switch {
		case err == nil:
			r.Cap = c
		case !errors.Is(err, driver.ErrNoStock):
			return r, s.keyErr("reconcile", err)
		}
	}
	if !r.Balanced() {
		return r, s.keyErr("reconcile", fmt.Errorf("%w: supplied %d, available %d + confirmed %d + reserved %d; unbalanced segments %v; buyers over the limit: %d",
			ErrUnbalanced, r.Supplied, r.Available, r.Confirmed, r.Reserved, r.Unbalanced, len(r.OverLimit)))
	}
	return r, nil
}
