package stocktest

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// RunOrders checks store against the driver.OrderStore contract and, if store
// implements it, driver.SupplyCap's. It uses SKUs of its own (random names),
// so it may run against a shared store.
func RunOrders(t *testing.T, store driver.OrderStore) {
	t.Run("Orders", func(t *testing.T) { testOrders(t, store) })
	sc, ok := store.(driver.SupplyCap)
	if !ok {
		t.Logf("%T does not implement driver.SupplyCap: its orders are not capped", store)
		return
	}
	t.Run("SupplyCap", func(t *testing.T) { testSupplyCap(t, store, sc) })
	t.Run("SupplyCapConcurrent", func(t *testing.T) { testSupplyCapConcurrent(t, store, sc) })
}

func ordered(t *testing.T, store driver.OrderStore, sku string, want int64) {
	t.Helper()
	if n, err := store.OrderedUnits(ctxT(t), sku); err != nil || n != want {
		t.Fatalf("OrderedUnits = %d, %v; want %d", n, err, want)
	}
}

func supply(t *testing.T, sc driver.SupplyCap, sku string, supplied, ordered int64) {
	t.Helper()
	if s, o, err := sc.Supply(ctxT(t), sku); err != nil || s != supplied || o != ordered {
		t.Fatalf("Supply = %d supplied, %d ordered, %v; want %d, %d", s, o, err, supplied, ordered)
	}
}

func testOrders(t *testing.T, store driver.OrderStore) {
	ctx, sku := ctxT(t), SKU("orders")
	o := driver.StockOrder{ID: "o1", SKU: sku, User: "u", Qty: 1, Unique: true}
	if err := store.SaveOrder(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveOrder(ctx, o); err != nil {
		t.Fatalf("saving the same order again: %v", err)
	}
	o2 := o
	o2.ID = "o2"
	if err := store.SaveOrder(ctx, o2); !errors.Is(err, driver.ErrDuplicateOrder) {
		t.Fatalf("second order of the buyer: %v, want ErrDuplicateOrder", err)
	}
	ordered(t, store, sku, 1)
	if err := store.CancelOrder(ctx, sku, "o1"); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveOrder(ctx, o2); err != nil {
		t.Fatalf("order after cancellation: %v", err)
	}
	if err := store.SaveOrder(ctx, driver.StockOrder{ID: "o3", SKU: sku, User: "u", Qty: 2}); err != nil {
		t.Fatalf("non-unique order: %v", err)
	}
	ordered(t, store, sku, 3)
	for _, id := range []string{"o1", "missing"} {
		if err := store.CancelOrder(ctx, sku, id); err != nil {
			t.Fatalf("cancelling a cancelled or unknown order: %v", err)
		}
	}
	ordered(t, store, sku, 3)
	for _, bad := range []driver.StockOrder{
		{SKU: sku, User: "u", Qty: 1},
		{ID: "x", User: "u", Qty: 1},
		{ID: "x", SKU: sku, User: "u"},
		{ID: "x", SKU: sku, User: "u", Qty: -1},
	} {
		if err := store.SaveOrder(ctx, bad); !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("SaveOrder(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	ordered(t, store, sku, 3)
}

func testSupplyCap(t *testing.T, store driver.OrderStore, sc driver.SupplyCap) {
	ctx, sku := ctxT(t), SKU("cap")
	// No cap yet: orders are not capped, and the cap's reads say ErrNoStock.
	if _, _, err := sc.Supply(ctx, sku); !errors.Is(err, driver.ErrNoStock) {
		t.Fatalf("Supply without a cap: %v, want ErrNoStock", err)
	}
	if _, err := sc.AddSupply(ctx, sku, 1); !errors.Is(err, driver.ErrNoStock) {
		t.Fatalf("AddSupply without a cap: %v, want ErrNoStock", err)
	}
	for i, q := range []int64{1, 2} {
		if err := store.SaveOrder(ctx, driver.StockOrder{ID: "old" + strconv.Itoa(i), SKU: sku, User: "old", Qty: q}); err != nil {
			t.Fatalf("order before the cap: %v", err)
		}
	}
	// The cap counts the live orders saved before it, and refuses to start
	// below them.
	if created, err := sc.InitSupply(ctx, sku, 2); !errors.Is(err, driver.ErrSupplyExceeded) || created {
		t.Fatalf("InitSupply(2) under 3 ordered units = %v, %v; want false, ErrSupplyExceeded", created, err)
	}
	if _, _, err := sc.Supply(ctx, sku); !errors.Is(err, driver.ErrNoStock) {
		t.Fatalf("Supply after a refused InitSupply: %v, want ErrNoStock", err)
	}
	if created, err := sc.InitSupply(ctx, sku, 5); err != nil || !created {
		t.Fatalf("InitSupply(5) = %v, %v; want true, nil", created, err)
	}
	if created, err := sc.InitSupply(ctx, sku, 9); err != nil || created {
		t.Fatalf("second InitSupply = %v, %v; want false, nil", created, err)
	}
	supply(t, sc, sku, 5, 3)

	full := driver.StockOrder{ID: "full", SKU: sku, User: "a", Qty: 2, Unique: true}
	if err := store.SaveOrder(ctx, full); err != nil {
		t.Fatalf("order up to the supply: %v", err)
	}
	supply(t, sc, sku, 5, 5)
	if err := store.SaveOrder(ctx, driver.StockOrder{ID: "over", SKU: sku, User: "b", Qty: 1}); !errors.Is(err, driver.ErrSupplyExceeded) {
		t.Fatalf("order beyond the supply: %v, want ErrSupplyExceeded", err)
	}
	if err := store.SaveOrder(ctx, full); err != nil {
		t.Fatalf("saving a saved order again at full supply: %v", err)
	}
	if err := store.SaveOrder(ctx, driver.StockOrder{ID: "dup", SKU: sku, User: "a", Qty: 1, Unique: true}); !errors.Is(err, driver.ErrDuplicateOrder) {
		t.Fatalf("second order of the buyer: %v, want ErrDuplicateOrder", err)
	}
	supply(t, sc, sku, 5, 5)
	ordered(t, store, sku, 5)

	// Cancelling counts once; the refused order was not saved.
	for range 2 {
		if err := store.CancelOrder(ctx, sku, "full"); err != nil {
			t.Fatal(err)
		}
		supply(t, sc, sku, 5, 3)
	}
	if err := store.CancelOrder(ctx, sku, "over"); err != nil {
		t.Fatal(err)
	}
	supply(t, sc, sku, 5, 3)

	// Withdrawals stop at the ordered units; restocks raise the cap.
	if _, err := sc.AddSupply(ctx, sku, -3); !errors.Is(err, driver.ErrSupplyExceeded) {
		t.Fatalf("withdrawing below the ordered units: %v, want ErrSupplyExceeded", err)
	}
	if n, err := sc.AddSupply(ctx, sku, -2); err != nil || n != 3 {
		t.Fatalf("AddSupply(-2) = %d, %v; want 3", n, err)
	}
	if err := store.SaveOrder(ctx, driver.StockOrder{ID: "b1", SKU: sku, User: "b", Qty: 1}); !errors.Is(err, driver.ErrSupplyExceeded) {
		t.Fatalf("order after the withdrawal: %v, want ErrSupplyExceeded", err)
	}
	if n, err := sc.AddSupply(ctx, sku, 1); err != nil || n != 4 {
		t.Fatalf("AddSupply(1) = %d, %v; want 4", n, err)
	}
	if err := store.SaveOrder(ctx, driver.StockOrder{ID: "b1", SKU: sku, User: "b", Qty: 1}); err != nil {
		t.Fatalf("order after the restock: %v", err)
	}
	supply(t, sc, sku, 4, 4)
	ordered(t, store, sku, 4)
	if _, err := sc.InitSupply(ctx, "", 1); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("InitSupply of an empty SKU: %v, want ErrInvalidArgument", err)
	}
}

// testSupplyCapConcurrent races more orders than the supply: exactly the
// supply is saved, whoever wins.
func testSupplyCapConcurrent(t *testing.T, store driver.OrderStore, sc driver.SupplyCap) {
	ctx, sku := ctxT(t), SKU("capconc")
	const units, buyers = 10, 40
	if _, err := sc.InitSupply(ctx, sku, units); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var won atomic.Int64
	for i := range buyers {
		wg.Go(func() {
			err := store.SaveOrder(ctx, driver.StockOrder{ID: "c" + strconv.Itoa(i), SKU: sku, User: "u" + strconv.Itoa(i), Qty: 1, Unique: true})
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, driver.ErrSupplyExceeded):
				t.Errorf("SaveOrder: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != units {
		t.Fatalf("%d orders saved on a supply of %d", won.Load(), units)
	}
	ordered(t, store, sku, units)
	supply(t, sc, sku, units, units)
}
