package stock_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/patterns/stock"
)

// TestSupplyCapAfterLedgerLoss removes confirmed entries from the ledger
// behind the Stock's back — what a Redis failover that lost them does: their
// units are available again in the ledger while their orders stay live. On
// every backend, the order store's supply cap refuses the orders that would
// sell them a second time (ErrSoldOut), Reconcile names them (Unsellable),
// and a restock or a cancellation makes exactly its units sellable.
func TestSupplyCapAfterLedgerLoss(t *testing.T) {
	for _, em := range envs {
		t.Run(em.name, func(t *testing.T) {
			e := em.make(t, 2)
			ctx := ctxT(t, time.Minute)
			sku := "cap-" + randHex(4)
			const supplied, lost = 10, 3
			var stocks []*stock.Stock
			for i, c := range e.clients {
				s := stock.New(c, sku, stock.WithSegments(4), stock.WithOrders(e.orders[i]), stock.WithSupplyCap())
				if created, err := s.Init(ctx, supplied); err != nil || created != (i == 0) {
					t.Fatalf("Init = %v, %v", created, err)
				}
				stocks = append(stocks, s)
			}
			var orders []*stock.Order
			for i := range supplied {
				o, err := stocks[i%2].Buy(ctx, "b"+strconv.Itoa(i), 1)
				if err != nil {
					t.Fatal(err)
				}
				orders = append(orders, o)
			}
			var sb driver.StockBackend
			if !driver.As(e.clients[0].Backend(), &sb) {
				t.Fatal("no StockBackend")
			}
			for _, o := range orders[:lost] {
				for _, p := range o.Parts {
					if err := sb.SettleStock(ctx, sku, p.Seg, p.Entry, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := range 2 * lost {
				_, err := stocks[i%2].Buy(ctx, "new"+strconv.Itoa(i), 1)
				if !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("a new buyer after the ledger lost %d entries: %v, want ErrSoldOut", lost, err)
				}
			}
			r, err := stocks[1].Reconcile(ctx)
			if err != nil || r.Ordered != supplied || r.Cap != supplied || r.Confirmed != supplied-lost || r.Available != lost ||
				r.Unsellable() != lost || r.OrdersMatch() {
				t.Fatalf("Reconcile = %+v (unsellable %d), %v; want %d ordered of a cap of %d, %d confirmed, %d available and unsellable",
					r, r.Unsellable(), err, supplied, supplied, supplied-lost, lost)
			}
			if err := stocks[0].Restock(ctx, 2); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if _, err := stocks[1].Buy(ctx, "restocked"+strconv.Itoa(i), 1); err != nil {
					t.Fatalf("buying a restocked unit: %v", err)
				}
			}
			if _, err := stocks[1].Buy(ctx, "late", 1); !errors.Is(err, stock.ErrSoldOut) {
				t.Fatalf("after the restock sold out: %v, want ErrSoldOut", err)
			}
			if err := stocks[0].Cancel(ctx, orders[lost]); err != nil {
				t.Fatal(err)
			}
			if _, err := stocks[1].Buy(ctx, "late", 1); err != nil {
				t.Fatalf("buying a cancelled order's unit: %v", err)
			}
			r, err = stocks[0].Reconcile(ctx)
			if err != nil || r.Ordered != supplied+2 || r.Cap != supplied+2 || r.Unsellable() != lost {
				t.Fatalf("Reconcile at the end = %+v (unsellable %d), %v", r, r.Unsellable(), err)
			}
		})
	}
}

// TestSupplyCapAdoptsExistingSale: a SKU sold without the cap gets one at
// the next Init, from the ledger's supplied units and the live orders saved
// before it.
func TestSupplyCapAdoptsExistingSale(t *testing.T) {
	for _, em := range envs {
		t.Run(em.name, func(t *testing.T) {
			e := em.make(t, 1)
			ctx := ctxT(t, time.Minute)
			sku := "adopt-" + randHex(4)
			old := stock.New(e.clients[0], sku, stock.WithSegments(2), stock.WithOrders(e.orders[0]))
			if _, err := old.Init(ctx, 4); err != nil {
				t.Fatal(err)
			}
			if _, err := old.Buy(ctx, "a", 1); err != nil {
				t.Fatal(err)
			}
			if r, err := old.Reconcile(ctx); err != nil || r.Cap != -1 {
				t.Fatalf("Reconcile without a cap = %+v, %v; want Cap -1", r, err)
			}
			s := stock.New(e.clients[0], sku, stock.WithOrders(e.orders[0]), stock.WithSupplyCap())
			if created, err := s.Init(ctx, 100); err != nil || created {
				t.Fatalf("Init of an existing SKU = %v, %v", created, err)
			}
			sc := e.orders[0].(driver.SupplyCap)
			if sup, ord, err := sc.Supply(ctx, sku); err != nil || sup != 4 || ord != 1 {
				t.Fatalf("the cap adopted: %d supplied, %d ordered, %v; want 4 (the ledger's, not Init's 100) and 1", sup, ord, err)
			}
		})
	}
}
