// Package stocktest is a conformance suite for implementations of
// driver.StockBackend and driver.OrderStore: a backend that passes Run, and
// an order store that passes RunOrders, serve patterns/stock.
//
//	func TestStock(t *testing.T)  { stocktest.Run(t, myBackend) }
//	func TestOrders(t *testing.T) { stocktest.RunOrders(t, myOrderStore) }
package stocktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Run checks sb against the driver.StockBackend contract. It uses SKUs of
// its own (random names), so it may run against a shared store.
func Run(t *testing.T, sb driver.StockBackend) {
	t.Run("Init", func(t *testing.T) { testInit(t, sb) })
	t.Run("Take", func(t *testing.T) { testTake(t, sb) })
	t.Run("Settle", func(t *testing.T) { testSettle(t, sb) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, sb) })
	t.Run("Add", func(t *testing.T) { testAdd(t, sb) })
	t.Run("Quota", func(t *testing.T) { testQuota(t, sb) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, sb) })
	t.Run("Args", func(t *testing.T) { testArgs(t, sb) })
}

// SKU returns a fresh random SKU name with the given stem.
func SKU(stem string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return stem + "-" + hex.EncodeToString(b[:])
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func allSegs(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func levels(t *testing.T, sb driver.StockBackend, sku string, n int) []int64 {
	t.Helper()
	l, err := sb.StockLevels(ctxT(t), sku, allSegs(n))
	if err != nil {
		t.Fatalf("StockLevels: %v", err)
	}
	return l
}

func balanced(t *testing.T, sb driver.StockBackend, sku string, seg int) driver.StockSegment {
	t.Helper()
	s, err := sb.StockSegment(ctxT(t), sku, seg)
	if err != nil {
		t.Fatalf("StockSegment: %v", err)
	}
	if !s.Balanced() {
		t.Fatalf("segment %d unbalanced: %+v", seg, s)
	}
	return s
}

func testInit(t *testing.T, sb driver.StockBackend) {
	ctx, sku := ctxT(t), SKU("init")
	n, created, err := sb.InitStock(ctx, sku, []int64{3, 4, 5})
	if err != nil || !created || n != 3 {
		t.Fatalf("InitStock = %d, %v, %v; want 3, true, nil", n, created, err)
	}
	n, created, err = sb.InitStock(ctx, sku, []int64{9, 9})
	if err != nil || created || n != 3 {
		t.Fatalf("second InitStock = %d, %v, %v; want 3, false, nil", n, created, err)
	}
	if l := levels(t, sb, sku, 3); l[0] != 3 || l[1] != 4 || l[2] != 5 {
		t.Fatalf("levels %v, want [3 4 5]", l)
	}
	if l, err := sb.StockLevels(ctx, sku, []int{2, 0}); err != nil || l[0] != 5 || l[1] != 3 {
		t.Fatalf("StockLevels([2 0]) = %v, %v", l, err)
	}
	if s := balanced(t, sb, sku, 1); s.Level != 4 || s.Supplied != 4 || len(s.Entries) != 0 {
		t.Fatalf("fresh segment %+v", s)
	}
	if _, err := sb.StockLevels(ctx, SKU("missing"), []int{0}); !errors.Is(err, driver.ErrNoStock) {
		t.Fatalf("StockLevels of a missing SKU: %v, want ErrNoStock", err)
	}
	if _, err := sb.TakeStock(ctx, driver.StockTake{SKU: SKU("missing"), ID: "x", Qty: 1}); !errors.Is(err, driver.ErrNoStock) {
		t.Fatalf("TakeStock of a missing SKU: %v, want ErrNoStock", err)
	}
}

func testTake(t *testing.T, sb driver.StockBackend) {
	ctx, sku := ctxT(t), SKU("take")
	if _, _, err := sb.InitStock(ctx, sku, []int64{5, 1}); err != nil {
		t.Fatal(err)
	}
	lv, err := sb.TakeStock(ctx, driver.StockTake{SKU: sku, Seg: 0, ID: "a", User: "u:1", Qty: 2})
	if err != nil || lv != 3 {
		t.Fatalf("TakeStock = %d, %v; want 3, nil", lv, err)
	}
	lv, err = sb.TakeStock(ctx, driver.StockTake{SKU: sku, Seg: 0, ID: "a", User: "u:1", Qty: 2})
	if err != nil || lv != 3 {
		t.Fatalf("repeated TakeStock = %d, %v; want 3, nil (no change)", lv, err)
	}
	lv, err = sb.TakeStock(ctx, driver.StockTake{SKU: sku, Seg: 1, ID: "b", Qty: 2})
	if !errors.Is(err, driver.ErrStockShort) || lv != 1 {
		t.Fatalf("TakeStock of 2 from 1 = %d, %v; want 1, ErrStockShort", lv, err)
	}
	lv, err = sb.TakeStock(ctx, driver.StockTake{SKU: sku, Seg: 0, ID: "c", Qty: 1, Expect: 4})
	if !errors.Is(err, driver.ErrStockShort) || lv != 3 {
		t.Fatalf("TakeStock expecting 4 at 3 = %d, %v; want 3, ErrStockShort", lv, err)
	}
	lv, err = sb.TakeStock(ctx, driver.StockTake{SKU: sku, Seg: 0, ID: "c", Qty: 1, Expect: 3})
	if err != nil || lv != 2 {
		t.Fatalf("TakeStock expecting 3 at 3 = %d, %v; want 2, nil", lv, err)
	}
	s := balanced(t, sb, sku, 0)
	if s.Level != 2 || s.Supplied != 5 || len(s.Entries) != 2 {
		t.Fatalf("segment %+v", s)
	}
	for _, e := range s.Entries {
		if e.ID == "a" && (e.User != "u:1" || e.Qty != 2 || !e.Deadline.IsZero()) {
			t.Fatalf("entry %+v", e)
		}
	}
}

func testSettle(t *testing.T, sb driver.StockBackend) {
	ctx, sku := ctxT(t), SKU("settle")
	if _, _, err := sb.InitStock(ctx, sku, []int64{5}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.TakeStock(ctx, driver.StockTake{SKU: sku, ID: "a", User: "u", Qty: 2, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s := balanced(t, sb, sku, 0)
	if len(s.Entries) != 1 || s.Entries[0].Deadline.IsZero() {
		t.Fatalf("reservation entry %+v", s.Entries)
	}
	if err := sb.SettleStock(ctx, sku, 0, "a", true); err != nil {
		t.Fatalf("confirm: %v", err)
	}
	if err := sb.SettleStock(ctx, sku, 0, "a", true); err != nil {
		t.Fatalf("confirm again: %v", err)
	}
	if s := balanced(t, sb, sku, 0); !s.Entries[0].Deadline.IsZero() {
		t.Fatalf("confirmed entry keeps a deadline: %+v", s.Entries[0])
	}
	if err := sb.SettleStock(ctx, sku, 0, "a", false); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := sb.SettleStock(ctx, sku, 0, "a", false); !errors.Is(err, driver.ErrNoStockEntry) {
		t.Fatalf("release again: %v, want ErrNoStockEntry", err)
	}
	if err := sb.SettleStock(ctx, sku, 0, "zz", true); !errors.Is(err, driver.ErrNoStockEntry) {
		t.Fatalf("confirm missing: %v, want ErrNoStockEntry", err)
	}
	if s := balanced(t, sb, sku, 0); s.Level != 5 || len(s.Entries) != 0 {
		t.Fatalf("after release %+v", s)
	}
}

func testExpiry(t *testing.T, sb driver.StockBackend) {
	ctx, sku := ctxT(t), SKU("expiry")
	if _, _, err := sb.InitStock(ctx, sku, []int64{5}); err != nil {
		t.Fatal(err)
	}
	// The short reservations live a second: long enough that the takes and
	// the first ExpireStock below finish inside it on a loaded machine (with
	// 40 ms, three PostgreSQL round trips under CI load outlived it).
	const ttl = time.Second
	start := time.Now()
	for _, id := range []string{"r1", "r2"} {
		if _, err := sb.TakeStock(ctx, driver.StockTake{SKU: sku, ID: id, User: "u:" + id, Qty: 1, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sb.TakeStock(ctx, driver.StockTake{SKU: sku, ID: "long", User: "v", Qty: 1, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if es, err := sb.ExpireStock(ctx, sku, 0, 10); err != nil || len(es) != 0 {
		t.Fatalf("ExpireStock before the deadline = %v, %v (%v after the first take)", es, err, time.Since(start))
	}
	time.Sleep(time.Until(start.Add(ttl + 200*time.Millisecond)))
	if err := sb.SettleStock(ctx, sku, 0, "r1", true); !errors.Is(err, driver.ErrNoStockEntry) {
		t.Fatalf("confirm expired: %v, want ErrNoStockEntry", err)
	}
	if s := balanced(t, sb, sku, 0); s.Level != 2 || len(s.Entries) != 3 {
		t.Fatalf("an expired reservation stays until ExpireStock: %+v", s)
	}
	es, err := sb.ExpireStock(ctx, sku, 0, 1)
	if err != nil || len(es) != 1 {
		t.Fatalf("ExpireStock(max 1) = %v, %v", es, err)
	}
	es2, err := sb.ExpireStock(ctx, sku, 0, 10)
	if err != nil || len(es2) != 1 || es2[0].ID == es[0].ID {
		t.Fatalf("second ExpireStock = %v, %v", es2, err)
	}
	for _, e := range append(es, es2...) {
		if e.User != "u:"+e.ID || e.Qty != 1 {
			t.Fatalf("expired entry %+v", e)
		}
	}
	if s := balanced(t, sb, sku, 0); s.Level != 4 || len(s.Entries) != 1 || s.Entries[0].ID != "long" {
		t.Fatalf("after expiry %+v", s)
	}
}

func testAdd(t *testing.T, sb driver.StockBackend) {
	ctx, sku := ctxT(t), SKU("add")
	if _, _, err := sb.InitStock(ctx, sku, []int64{1, 0}); err != nil {
		t.Fatal(err)
	}
	if lv, err := sb.AddStock(ctx, sku, 1, 7); err != nil || lv != 7 {
		t.Fatalf("AddStock = %d, %v", lv, err)
	}
	if lv, err := sb.AddStock(ctx, sku, 1, -8); !errors.Is(err, driver.ErrStockShort) || lv != 7 {
		t.Fatalf("over-withdraw = %d, %v; want 7, ErrStockShort", lv, err)
	}
	if lv, err := sb.AddStock(ctx, sku, 1, -2); err != nil || lv != 5 {
		t.Fatalf("withdraw = %d, %v", lv, err)
	}
	if s := balanced(t, sb, sku, 1); s.Supplied != 5 {
		t.Fatalf("supplied %d, want 5", s.Supplied)
	}
}

func testQuota(t *testing.T, sb driver.StockBackend) {
	ctx, sku := ctxT(t), SKU("quota")
	if n, err := sb.ClaimQuota(ctx, sku, "u", 1, 1); err != nil || n != 1 {
		t.Fatalf("claim = %d, %v", n, err)
	}
	if n, err := sb.ClaimQuota(ctx, sku, "u", 1, 1); !errors.Is(err, driver.ErrQuotaExceeded) || n != 1 {
		t.Fatalf("claim past the limit = %d, %v; want 1, ErrQuotaExceeded", n, err)
	}
	if n, err := sb.ClaimQuota(ctx, sku, "v", 3, 2); !errors.Is(err, driver.ErrQuotaExceeded) || n != 0 {
		t.Fatalf("first claim past the limit = %d, %v; want 0, ErrQuotaExceeded", n, err)
	}
	if n, err := sb.ClaimQuota(ctx, sku, "u", -5, 0); err != nil || n != 0 {
		t.Fatalf("return = %d, %v; want 0 (never below zero)", n, err)
	}
	if n, err := sb.ClaimQuota(ctx, sku, "u", 4, 0); err != nil || n != 4 {
		t.Fatalf("unlimited claim = %d, %v", n, err)
	}
	if n, err := sb.ClaimQuota(ctx, SKU("other"), "u", 1, 1); err != nil || n != 1 {
		t.Fatalf("claim on another SKU = %d, %v", n, err)
	}
}

func testConcurrent(t *testing.T, sb driver.StockBackend) {
	ctx, sku := ctxT(t), SKU("conc")
	if _, _, err := sb.InitStock(ctx, sku, []int64{20}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var won atomic.Int64
	for i := range 60 {
		wg.Go(func() {
			_, err := sb.TakeStock(ctx, driver.StockTake{SKU: sku, ID: "e" + string(rune('A'+i%26)) + string(rune('a'+i/26)), Qty: 1})
			switch {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, driver.ErrStockShort):
				t.Errorf("TakeStock: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 20 {
		t.Fatalf("%d takes succeeded on 20 units", won.Load())
	}
	if s := balanced(t, sb, sku, 0); s.Level != 0 || len(s.Entries) != 20 {
		t.Fatalf("after the rush %+v", s)
	}
}

func testArgs(t *testing.T, sb driver.StockBackend) {
	ctx := ctxT(t)
	bad := []driver.StockTake{
		{SKU: "", ID: "x", Qty: 1},
		{SKU: "s", ID: "", Qty: 1},
		{SKU: "s", ID: "x", Qty: 0},
		{SKU: "s", Seg: -1, ID: "x", Qty: 1},
		{SKU: "s", ID: "x", Qty: 1, TTL: -1},
	}
	for _, b := range bad {
		if _, err := sb.TakeStock(ctx, b); !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("TakeStock(%+v) = %v, want ErrInvalidArgument", b, err)
		}
	}
	if _, _, err := sb.InitStock(ctx, "s", nil); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("InitStock without segments = %v, want ErrInvalidArgument", err)
	}
	if _, _, err := sb.InitStock(ctx, SKU("neg"), []int64{-1}); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("InitStock with a negative level = %v, want ErrInvalidArgument", err)
	}
}
