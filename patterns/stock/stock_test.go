package stock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/stock"
)

// plainBackend implements only driver.Backend.
type plainBackend struct{ driver.Backend }

func memStock(t *testing.T, total int64, opts ...stock.Option) (*stock.Stock, *memlock.Backend) {
	t.Helper()
	b := memlock.New()
	c := lockx.New(b)
	t.Cleanup(func() { _ = c.Close() })
	s := stock.New(c, "sku-1", opts...)
	if _, err := s.Init(context.Background(), total); err != nil {
		t.Fatal(err)
	}
	return s, b
}

func TestUnsupported(t *testing.T) {
	ctx := context.Background()
	s := stock.New(lockx.New(plainBackend{}), "k")
	if _, err := s.Init(ctx, 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Init on a backend without StockBackend = %v, want ErrUnsupported", err)
	}
	c := lockx.New(memlock.New())
	defer c.Close()
	if _, err := stock.New(c, "k").Buy(ctx, "u", 1); !errors.Is(err, stock.ErrNotInitialised) {
		t.Fatalf("Buy before Init = %v, want ErrNotInitialised", err)
	}
	if _, err := stock.New(c, "k", stock.WithSegments(0)).Init(ctx, 1); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("zero segments = %v, want ErrInvalidArgument", err)
	}
	if _, err := stock.New(nil, "k").Init(ctx, 1); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("nil client = %v, want ErrInvalidArgument", err)
	}
	for _, orders := range []driver.OrderStore{nil, failingOrders{}} {
		if _, err := stock.New(c, "k", stock.WithOrders(orders), stock.WithSupplyCap()).Init(ctx, 1); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("WithSupplyCap with order store %T = %v, want ErrUnsupported", orders, err)
		}
	}
}

func TestInitAdoptsSegments(t *testing.T) {
	b := memlock.New()
	c := lockx.New(b)
	defer c.Close()
	ctx := context.Background()
	a := stock.New(c, "sku", stock.WithSegments(4))
	if created, err := a.Init(ctx, 10); err != nil || !created {
		t.Fatalf("Init = %v, %v", created, err)
	}
	late := stock.New(c, "sku", stock.WithSegments(16))
	if created, err := late.Init(ctx, 99); err != nil || created || late.Segments() != 4 {
		t.Fatalf("second Init = %v, %v, %d segments; want adoption of 4", created, err, late.Segments())
	}
	if n, _ := late.Available(ctx); n != 10 {
		t.Fatalf("available %d, want 10 (never reset)", n)
	}
}

// TestGatherNoFalseSoldOut: no single segment holds the quantity, the SKU
// does, so the order is gathered from several segments, in both modes and
// under contention.
func TestGatherNoFalseSoldOut(t *testing.T) {
	for _, em := range envs {
		t.Run(em.name, func(t *testing.T) {
			e := em.make(t, 2)
			for _, mode := range []stock.Mode{stock.LockFree, stock.Locked} {
				t.Run(mode.String(), func(t *testing.T) { gatherUnderContention(t, e, mode) })
			}
		})
	}
}

func gatherUnderContention(t *testing.T, e env, mode stock.Mode) {
	ctx := ctxT(t, time.Minute)
	sku := "gather-" + randHex(4)
	// 100 units over 16 segments: 6 or 7 each. Buyers of 3 leave 0 or 1 in
	// each segment, 4 in all: the last order must be gathered.
	var stocks []*stock.Stock
	for i, c := range e.clients {
		s := stock.New(c, sku, stock.WithMode(mode), stock.WithSegments(16), stock.WithLimit(0), stock.WithOrders(e.orders[i]))
		if _, err := s.Init(ctx, 100); err != nil {
			t.Fatal(err)
		}
		stocks = append(stocks, s)
	}
	var sold atomic.Int64
	var multi atomic.Int64
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			s := stocks[g%len(stocks)]
			for {
				o, err := s.Buy(ctx, "buyer", 3)
				if errors.Is(err, stock.ErrSoldOut) {
					return
				}
				if err != nil {
					t.Errorf("buy: %v", err)
					return
				}
				sold.Add(o.Qty)
				if len(o.Parts) > 1 {
					multi.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if sold.Load() != 99 {
		t.Fatalf("sold %d units, want 99 (33 orders of 3; 1 left)", sold.Load())
	}
	if multi.Load() == 0 {
		t.Fatalf("no order was gathered from several segments")
	}
	r, err := stocks[0].Reconcile(ctx)
	if err != nil || r.Available != 1 || r.Confirmed != 99 || r.Ordered != 99 {
		t.Fatalf("reconcile %+v, %v", r, err)
	}
}

func TestReservation(t *testing.T) {
	ctx := context.Background()
	s, _ := memStock(t, 2, stock.WithSegments(2))
	o, err := s.Reserve(ctx, "alice", 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Reconcile(ctx); r.Reserved != 1 || r.Available != 1 {
		t.Fatalf("after Reserve: %+v", r)
	}
	if _, err := s.Buy(ctx, "alice", 1); !errors.Is(err, stock.ErrLimit) {
		t.Fatalf("an open reservation counts against the limit: %v", err)
	}
	if err := s.Confirm(ctx, o); err != nil {
		t.Fatal(err)
	}
	if !o.Deadline.IsZero() {
		t.Fatalf("confirmed order keeps a deadline")
	}
	short, err := s.Reserve(ctx, "bob", 1, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Buy(ctx, "carol", 1); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("reserved units are not for sale: %v", err)
	}
	time.Sleep(30 * time.Millisecond)
	if n, err := s.Expire(ctx); err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want 1", n, err)
	}
	if err := s.Confirm(ctx, short); !errors.Is(err, stock.ErrExpired) {
		t.Fatalf("confirm after expiry: %v, want ErrExpired", err)
	}
	if _, err := s.Buy(ctx, "bob", 1); err != nil {
		t.Fatalf("bob's quota came back with the expiry: %v", err)
	}
	if r, err := s.Reconcile(ctx); err != nil || r.Confirmed != 2 || r.Available != 0 {
		t.Fatalf("reconcile %+v, %v", r, err)
	}
	if _, err := s.Reserve(ctx, "dave", 1, 0); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("zero TTL: %v", err)
	}
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	orders := memlock.NewOrderStore()
	s, _ := memStock(t, 1, stock.WithOrders(orders))
	o, err := s.Buy(ctx, "alice", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(ctx, o); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Available(ctx); n != 1 {
		t.Fatalf("available %d after cancel (twice), want 1", n)
	}
	if n, _ := orders.OrderedUnits(ctx, "sku-1"); n != 0 {
		t.Fatalf("%d units still ordered", n)
	}
	if _, err := s.Buy(ctx, "alice", 1); err != nil {
		t.Fatalf("buy again after cancel: %v", err)
	}
	if _, err := s.Buy(ctx, "bob", 1); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("double cancel returned units twice: %v", err)
	}
}

// failingOrders fails every save, or reports a duplicate.
type failingOrders struct {
	driver.OrderStore
	dup bool
}

func (f failingOrders) SaveOrder(ctx context.Context, o driver.StockOrder) error {
	if f.dup {
		return driver.ErrDuplicateOrder
	}
	return driver.Unavailable("save order", errors.New("disk full"))
}

func (f failingOrders) CancelOrder(ctx context.Context, sku, id string) error { return nil }

func (f failingOrders) OrderedUnits(ctx context.Context, sku string) (int64, error) { return 0, nil }

func TestPersistenceFailureReturnsUnits(t *testing.T) {
	ctx := context.Background()
	for _, dup := range []bool{false, true} {
		s, _ := memStock(t, 1, stock.WithOrders(failingOrders{dup: dup}))
		_, err := s.Buy(ctx, "alice", 1)
		switch {
		case dup && !errors.Is(err, stock.ErrLimit):
			t.Fatalf("duplicate order: %v, want ErrLimit", err)
		case !dup && !errors.Is(err, lockx.ErrUnavailable):
			t.Fatalf("failed save: %v, want the store's error", err)
		}
		r, rerr := s.Reconcile(ctx)
		if rerr != nil || r.Available != 1 || r.Confirmed != 0 {
			t.Fatalf("units not returned: %+v, %v", r, rerr)
		}
	}
}

func TestSoldOutCache(t *testing.T) {
	ctx := context.Background()
	s, b := memStock(t, 1, stock.WithSoldOutCache(time.Hour), stock.WithSegments(1))
	if _, err := s.Buy(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Buy(ctx, "b", 1); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatal(err)
	}
	// Units added behind the Stock's back are not seen while the cache holds …
	if _, err := b.AddStock(ctx, "sku-1", 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Buy(ctx, "c", 1); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("cached verdict: %v, want ErrSoldOut", err)
	}
	// … a restock through it clears the cache.
	if err := s.Restock(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Buy(ctx, "c", 1); err != nil {
		t.Fatalf("after restock: %v", err)
	}
}

func TestLocalRate(t *testing.T) {
	ctx := context.Background()
	s, _ := memStock(t, 100, stock.WithLocalRate(1, 2), stock.WithLimit(0))
	var busy int
	for range 5 {
		if _, err := s.Buy(ctx, "a", 1); errors.Is(err, stock.ErrBusy) {
			busy++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if busy != 3 {
		t.Fatalf("%d of 5 refused with burst 2, want 3", busy)
	}
}

func TestArguments(t *testing.T) {
	ctx := context.Background()
	s, _ := memStock(t, 10, stock.WithLimit(2))
	if _, err := s.Buy(ctx, "", 1); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("empty user: %v", err)
	}
	if _, err := s.Buy(ctx, "a", 0); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("zero quantity: %v", err)
	}
	if _, err := s.Buy(ctx, "a", 3); !errors.Is(err, stock.ErrLimit) {
		t.Fatalf("quantity over the limit: %v", err)
	}
	if err := s.Restock(ctx, 0); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("restock 0: %v", err)
	}
	if err := s.Cancel(ctx, nil); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("cancel nil: %v", err)
	}
}
