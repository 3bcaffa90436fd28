package stock_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/patterns/stock"
)

// Flash-sale load: goroutines × attempts buyers on units, through three
// independent clients of one backend, in both modes.
const (
	loadGoroutines = 2000
	loadAttempts   = 5
	loadUnits      = 1000
	loadClients    = 3
	// Buyer ids repeat: every attempt beyond loadUsers is a second attempt
	// of an earlier buyer, so the per-user limit is exercised under load.
	loadUsers = 8000
)

func TestFlashSale(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	// The backends run side by side (they wait on different servers); the
	// two modes of one backend one after the other.
	for _, em := range envs {
		t.Run(em.name, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []stock.Mode{stock.LockFree, stock.Locked} {
				t.Run(mode.String(), func(t *testing.T) {
					flashSale(t, em.make(t, loadClients), mode)
				})
			}
		})
	}
}

func flashSale(t *testing.T, e env, mode stock.Mode) {
	ctx := ctxT(t, 5*time.Minute)
	sku := "sale-" + randHex(4)
	var stocks []*stock.Stock
	for i, c := range e.clients {
		s := stock.New(c, sku, stock.WithMode(mode), stock.WithSegments(16), stock.WithOrders(e.orders[i]))
		if _, err := s.Init(ctx, loadUnits); err != nil {
			t.Fatal(err)
		}
		stocks = append(stocks, s)
	}

	var (
		sold, soldOut, limited atomic.Int64
		mu                     sync.Mutex
		perUser                = make(map[string]int)
		lastSaleStart          time.Time // latest start of a successful buy
		soldOutEnds            []time.Time
		checks                 atomic.Int64
	)
	done := make(chan struct{})
	var reconciler sync.WaitGroup
	reconciler.Go(func() { // the invariant holds at every check, under load
		for {
			select {
			case <-done:
				return
			case <-time.After(25 * time.Millisecond):
			}
			if _, err := stocks[0].Reconcile(ctx); err != nil {
				t.Errorf("reconcile under load: %v", err)
				return
			}
			checks.Add(1)
		}
	})
	begin := time.Now()
	var wg sync.WaitGroup
	for g := range loadGoroutines {
		wg.Go(func() {
			for a := range loadAttempts {
				user := fmt.Sprintf("user-%d", (g*loadAttempts+a)%loadUsers)
				s := stocks[(g+a)%len(stocks)]
				start := time.Now()
				_, err := s.Buy(ctx, user, 1)
				end := time.Now()
				switch {
				case err == nil:
					sold.Add(1)
					mu.Lock()
					perUser[user]++
					if start.After(lastSaleStart) {
						lastSaleStart = start
					}
					mu.Unlock()
				case errors.Is(err, stock.ErrSoldOut):
					soldOut.Add(1)
					mu.Lock()
					soldOutEnds = append(soldOutEnds, end)
					mu.Unlock()
				case errors.Is(err, stock.ErrLimit):
					limited.Add(1)
				default:
					t.Errorf("buy: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	close(done)
	reconciler.Wait()

	// A sold-out verdict that ended before some successful purchase began
	// was false: units only ever leave in this run, so they were there.
	falseSoldOut := 0
	for _, end := range soldOutEnds {
		if end.Before(lastSaleStart) {
			falseSoldOut++
		}
	}
	overLimit := 0
	for _, n := range perUser {
		if n > 1 {
			overLimit++
		}
	}
	r, err := stocks[1].Reconcile(ctx)
	if err != nil {
		t.Fatalf("final reconcile: %v", err)
	}
	t.Logf("%s/%s: %d attempts in %v: sold %d, sold out %d, limit %d, false sold-outs %d, over limit %d; %d reconciliations under load; final %+v",
		e.name, mode, loadGoroutines*loadAttempts, elapsed.Round(time.Millisecond), sold.Load(), soldOut.Load(), limited.Load(), falseSoldOut, overLimit, checks.Load(), r)
	if sold.Load() != loadUnits {
		t.Errorf("sold %d, want exactly %d", sold.Load(), loadUnits)
	}
	if falseSoldOut != 0 {
		t.Errorf("%d false sold-outs", falseSoldOut)
	}
	if overLimit != 0 || len(r.OverLimit) != 0 {
		t.Errorf("%d buyers over the limit (ledger: %d)", overLimit, len(r.OverLimit))
	}
	if r.Available != 0 || r.Confirmed != loadUnits || r.Reserved != 0 || r.Supplied != loadUnits || r.Ordered != loadUnits {
		t.Errorf("final report %+v, want everything sold, confirmed and ordered", r)
	}
	if got := sold.Load() + soldOut.Load() + limited.Load(); got != loadGoroutines*loadAttempts {
		t.Errorf("%d outcomes for %d attempts", got, loadGoroutines*loadAttempts)
	}
}
