package stock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lockx-go/lockx/patterns/stock"
)

// TestRapidSequences is the rapid (pgregory.net/rapid) form of
// TestRandomSequences on memlock: rapid draws buy / reserve / confirm /
// cancel / restock / expire sequences over a Stock with 1–5 segments in
// both modes, shrinks a failure to a minimal sequence, and checks every
// outcome against a model and, after every step, the reconciliation
// invariant:
//
//   - a purchase succeeds iff the model has the units and the buyer is
//     within the limit (no oversell, no false sold-out, exact limit);
//   - Available + Confirmed + Reserved = Supplied in total and per segment
//     (no Unbalanced segment, no buyer OverLimit), and Supplied, Confirmed,
//     Reserved and the persisted Ordered units equal the model's.
//
// Checked against broken variants, locally and not committed: with the
// model's restock not counted (supplied += n removed) rapid fails on the
// first restock, shrunk to "restock 1"; with Stock.Cancel returning nil
// without returning the units it fails on the first buy-then-cancel
// (Confirmed 1, model 0).
func TestRapidSequences(t *testing.T) {
	t.Parallel()
	e := memEnv(t, 1)
	rapid.Check(t, func(rt *rapid.T) {
		mode := rapid.SampledFrom([]stock.Mode{stock.LockFree, stock.Locked}).Draw(rt, "mode")
		rapidSequence(rt, e, mode)
	})
}

func rapidSequence(t *rapid.T, e env, mode stock.Mode) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const limit = 3
	k := rapid.IntRange(1, 5).Draw(t, "segments")
	total := rapid.Int64Range(0, 14).Draw(t, "total")
	s := stock.New(e.clients[0], "rapid-"+randHex(4), stock.WithMode(mode), stock.WithSegments(k), stock.WithLimit(limit), stock.WithOrders(e.orders[0]))
	if _, err := s.Init(ctx, total); err != nil {
		t.Fatal(err)
	}
	supplied := total
	live := map[string]*modelOrder{}
	held := map[string]int64{}
	var ids []string // live order IDs in creation order, for reproducible draws
	candidates := func(pred func(*modelOrder) bool) []*modelOrder {
		var c []*modelOrder
		for _, id := range ids {
			if m := live[id]; m != nil && pred(m) {
				c = append(c, m)
			}
		}
		return c
	}
	drop := func(m *modelOrder) {
		delete(live, m.o.ID)
		held[m.o.User] -= m.o.Qty
	}
	buy := func(t *rapid.T, reserve bool) {
		user := fmt.Sprintf("u%d", rapid.IntRange(0, 3).Draw(t, "user"))
		q := rapid.Int64Range(1, 3).Draw(t, "qty")
		short := reserve && rapid.Bool().Draw(t, "short")
		var inUse int64
		for _, m := range live {
			inUse += m.o.Qty
		}
		var o *stock.Order
		var err error
		if reserve {
			ttl := time.Hour
			if short {
				ttl = time.Millisecond
			}
			o, err = s.Reserve(ctx, user, q, ttl)
		} else {
			o, err = s.Buy(ctx, user, q)
		}
		switch {
		case held[user]+q > limit:
			if !errors.Is(err, stock.ErrLimit) {
				t.Fatalf("%s holds %d, asks %d (limit %d): err %v, want ErrLimit", user, held[user], q, limit, err)
			}
		case supplied-inUse < q:
			if !errors.Is(err, stock.ErrSoldOut) {
				t.Fatalf("%d available, asked %d: err %v, want ErrSoldOut", supplied-inUse, q, err)
			}
		case err != nil:
			t.Fatalf("%d available, asked %d: %v (false refusal)", supplied-inUse, q, err)
		default:
			live[o.ID] = &modelOrder{o: o, reserved: reserve, short: short}
			ids = append(ids, o.ID)
			held[user] += q
		}
	}
	t.Repeat(map[string]func(*rapid.T){
		"buy":     func(t *rapid.T) { buy(t, false) },
		"reserve": func(t *rapid.T) { buy(t, true) },
		"confirm": func(t *rapid.T) {
			c := candidates(func(m *modelOrder) bool { return m.reserved })
			if len(c) == 0 {
				t.Skip("no reservation")
			}
			m := rapid.SampledFrom(c).Draw(t, "order")
			if m.short {
				time.Sleep(3 * time.Millisecond)
			}
			err := s.Confirm(ctx, m.o)
			switch {
			case m.short && !errors.Is(err, stock.ErrExpired):
				t.Fatalf("confirm of an expired reservation: %v, want ErrExpired", err)
			case m.short:
				drop(m)
			case err != nil:
				t.Fatalf("confirm: %v", err)
			default:
				m.reserved = false
			}
		},
		"cancel": func(t *rapid.T) {
			c := candidates(func(*modelOrder) bool { return true })
			if len(c) == 0 {
				t.Skip("no order")
			}
			m := rapid.SampledFrom(c).Draw(t, "order")
			if err := s.Cancel(ctx, m.o); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			drop(m)
			if err := s.Cancel(ctx, m.o); err != nil { // twice returns nothing twice
				t.Fatalf("second cancel: %v", err)
			}
		},
		"restock": func(t *rapid.T) {
			n := rapid.Int64Range(1, 5).Draw(t, "n")
			if err := s.Restock(ctx, n); err != nil {
				t.Fatalf("restock: %v", err)
			}
			supplied += n
		},
		"expire": func(t *rapid.T) {
			time.Sleep(3 * time.Millisecond)
			var want int64
			for _, m := range candidates(func(m *modelOrder) bool { return m.reserved && m.short }) {
				want += m.o.Qty
				drop(m)
			}
			got, err := s.Expire(ctx)
			if err != nil || got != want {
				t.Fatalf("Expire = %d, %v; want %d", got, err, want)
			}
		},
		"": func(t *rapid.T) { // the invariant, checked after every action
			r, err := s.Reconcile(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var confirmed, reserved int64
			for _, m := range live {
				if m.reserved {
					reserved += m.o.Qty
				} else {
					confirmed += m.o.Qty
				}
			}
			if r.Available+r.Confirmed+r.Reserved != r.Supplied || len(r.Unbalanced) > 0 || len(r.OverLimit) > 0 {
				t.Fatalf("reconciliation broken: %+v", r)
			}
			if r.Supplied != supplied || r.Confirmed != confirmed || r.Reserved != reserved || r.Ordered != confirmed {
				t.Fatalf("report %+v, model supplied %d confirmed %d reserved %d", r, supplied, confirmed, reserved)
			}
		},
	})
}
