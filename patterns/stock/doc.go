// Package stock sells one SKU's inventory to many concurrent buyers across
// processes — a flash sale — without overselling and without telling a
// buyer "sold out" while the SKU still has the units they asked for.
//
//	locks := lockx.New(redislock.New(rdb)) // or pglock.New(pool), memlock.New()
//	sku := stock.New(locks, "sku:1001",
//		stock.WithSegments(16),                          // or WithConcurrency(expectedBuyers)
//		stock.WithOrders(pglock.NewOrderStore(pool)),    // durable orders, UNIQUE (sku, buyer)
//	)
//	if _, err := sku.Init(ctx, 1000); err != nil { … } // every process; the first creates
//	o, err := sku.Buy(ctx, userID, 1)
//	switch {
//	case errors.Is(err, stock.ErrSoldOut): …
//	case errors.Is(err, stock.ErrLimit): … // one order per buyer by default
//	}
//
// # Segments
//
// The units are split into K segments (default 16, the striping width that
// Java's ConcurrentHashMap long used by default), each
// a counter of its own — on Redis a key with its own hash tag, so on a
// Cluster the segments of one hot SKU spread over the nodes. A buyer starts
// at a random segment. A segment that cannot serve them is not the end:
// the buyer reads every segment's level and tries one that can; if none can
// alone but all together can (a multi-unit order late in the sale), the
// order is gathered from several segments under the SKU's gathering lock.
// ErrSoldOut is returned only when the levels add up to less than the
// quantity: there are no false sold-outs from uneven draining.
//
// # Modes
//
// LockFree (default) deducts with one atomic conditional step per segment —
// a Lua script on Redis, UPDATE … SET n = n - q WHERE n >= q on PostgreSQL.
// Locked is the classic segment-lock design: take the segment's lockx lock, read the
// level, write it back; the write is a compare-and-swap on the level read,
// so a holder that lost its lock cannot oversell. Both have the same API,
// limits, reservations and guarantees; LockFree is faster by an order of
// magnitude (docs/patterns/stock.md has the numbers). Locked is there for
// stores without a conditional update and as the baseline that shows why
// an atomic conditional decrement should replace the lock wherever the
// store has one.
//
// # Ledger and reconciliation
//
// Units never simply disappear from a segment: a deduction moves them into
// a ledger entry of the same segment (confirmed, or a reservation with a
// deadline), in the same atomic step. So every segment keeps
//
//	available + confirmed + reserved = supplied (initial + restocks)
//
// at every instant, and Reconcile checks it exactly, even under load.
// Cancel and expiry move units back; Restock adds to supplied.
//
// # Limits, reservations, durable orders
//
// Each buyer's units are counted per SKU (WithLimit, default 1): the count
// is claimed before the deduction and given back if it fails, so no buyer
// ever exceeds the limit, though a buyer with a purchase in flight is
// refused a second one meanwhile. Reserve holds units until a deadline for
// payment flows; Confirm makes the purchase, Cancel or Expire (run it
// periodically, from any process) returns them. With WithOrders, each
// confirmed purchase is saved to a driver.OrderStore; if saving fails the
// units and the quota go back, and pglock.OrderStore's UNIQUE (sku, buyer)
// index refuses a second order of a buyer even if a Redis quota counter was
// lost in a failover. The order is saved while the units are held as a
// reservation of the purchase lease, and confirmed after: a process that
// dies mid-purchase leaves a reservation that Expire returns, cancelling
// the order. Report.OrdersMatch compares the orders with the ledger.
// WithSupplyCap makes the order store also refuse orders beyond the SKU's
// supply (ErrSoldOut), so that a ledger that loses acknowledged writes — a
// Redis failover — cannot oversell; it serialises the SKU's order commits,
// so it is off by default.
//
// # Hot-key guard
//
// WithSoldOutCache answers ErrSoldOut locally for a while after the SKU
// sold out, and WithLocalRate sheds load above a rate with ErrBusy — both
// before the backend is asked, so a hot SKU that sold out stops costing
// round trips.
package stock
