package stock_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockx-go/lockx/patterns/stock"
)

// TestRandomSequences drives a Stock with seeded random sequences of buy,
// reserve, confirm, cancel, restock and expire, and checks every outcome
// against a model and the reconciliation invariant after every step:
//
//   - a purchase succeeds iff the model has the units and the buyer is
//     within the limit (no oversell, no false sold-out, exact limit);
//   - Available + Confirmed + Reserved = Supplied, per segment and in total,
//     and Supplied and the held units equal the model's.
//
// pgregory.net/rapid is not a dependency of the module (go.mod belongs to
// everyone), so the sequences come from math/rand/v2 with fixed seeds: a
// failure names its seed and step and replays exactly.
func TestRandomSequences(t *testing.T) {
	t.Parallel()
	seeds := map[string]int{"memlock": 100, "redis": 12, "postgres": 8}
	for _, em := range envs {
		t.Run(em.name, func(t *testing.T) {
			e := em.make(t, 1)
			for seed := range seeds[em.name] {
				for _, mode := range []stock.Mode{stock.LockFree, stock.Locked} {
					randomSequence(t, e, mode, uint64(seed))
				}
			}
		})
	}
}

type modelOrder struct {
	o        *stock.Order
	reserved bool
	short    bool // reserved with a TTL that has surely passed by the next step
}

func randomSequence(t *testing.T, e env, mode stock.Mode, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(mode)))
	ctx := ctxT(t, time.Minute)
	const limit = 3
	k := 1 + rng.IntN(5)
	total := int64(rng.IntN(15))
	s := stock.New(e.clients[0], "prop-"+randHex(4), stock.WithMode(mode), stock.WithSegments(k), stock.WithLimit(limit), stock.WithOrders(e.orders[0]))
	if _, err := s.Init(ctx, total); err != nil {
		t.Fatal(err)
	}
	supplied := total
	live := map[string]*modelOrder{}
	held := map[string]int64{}
	var ids []string
	pick := func(pred func(*modelOrder) bool) *modelOrder {
		var c []*modelOrder
		for _, id := range ids {
			if m := live[id]; m != nil && pred(m) {
				c = append(c, m)
			}
		}
		if len(c) == 0 {
			return nil
		}
		return c[rng.IntN(len(c))]
	}
	drop := func(m *modelOrder) {
		delete(live, m.o.ID)
		held[m.o.User] -= m.o.Qty
	}
	for step := range 40 {
		where := fmt.Sprintf("seed %d, %s, step %d", seed, mode, step)
		var inUse int64
		for _, m := range live {
			inUse += m.o.Qty
		}
		switch op := rng.IntN(10); {
		case op < 4: // buy or reserve
			user := fmt.Sprintf("u%d", rng.IntN(4))
			q := 1 + rng.Int64N(3)
			reserve := rng.IntN(3) == 0
			short := reserve && rng.IntN(2) == 0
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
					t.Fatalf("%s: %s holds %d, asks %d (limit %d): err %v, want ErrLimit", where, user, held[user], q, limit, err)
				}
			case supplied-inUse < q:
				if !errors.Is(err, stock.ErrSoldOut) {
					t.Fatalf("%s: %d available, asked %d: err %v, want ErrSoldOut", where, supplied-inUse, q, err)
				}
			case err != nil:
				t.Fatalf("%s: %d available, asked %d: %v (false refusal)", where, supplied-inUse, q, err)
			default:
				live[o.ID] = &modelOrder{o: o, reserved: reserve, short: short}
				ids = append(ids, o.ID)
				held[user] += q
			}
		case op < 6: // confirm a reservation
			m := pick(func(m *modelOrder) bool { return m.reserved })
			if m == nil {
				continue
			}
			if m.short {
				time.Sleep(3 * time.Millisecond)
			}
			err := s.Confirm(ctx, m.o)
			switch {
			case m.short && !errors.Is(err, stock.ErrExpired):
				t.Fatalf("%s: confirm of an expired reservation: %v, want ErrExpired", where, err)
			case m.short:
				drop(m)
			case err != nil:
				t.Fatalf("%s: confirm: %v", where, err)
			default:
				m.reserved = false
			}
		case op < 8: // cancel
			m := pick(func(*modelOrder) bool { return true })
			if m == nil {
				continue
			}
			if err := s.Cancel(ctx, m.o); err != nil {
				t.Fatalf("%s: cancel: %v", where, err)
			}
			drop(m)
			if err := s.Cancel(ctx, m.o); err != nil { // twice returns nothing twice
				t.Fatalf("%s: second cancel: %v", where, err)
			}
		case op < 9: // restock
			n := 1 + rng.Int64N(5)
			if err := s.Restock(ctx, n); err != nil {
				t.Fatalf("%s: restock: %v", where, err)
			}
			supplied += n
		default: // expire
			time.Sleep(3 * time.Millisecond)
			var want int64
			for _, m := range live {
				if m.reserved && m.short {
					want += m.o.Qty
					drop(m)
				}
			}
			got, err := s.Expire(ctx)
			if err != nil || got != want {
				t.Fatalf("%s: Expire = %d, %v; want %d", where, got, err, want)
			}
		}
		r, err := s.Reconcile(ctx)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var confirmed, reserved int64
		for _, m := range live {
			if m.reserved {
				reserved += m.o.Qty
			} else {
				confirmed += m.o.Qty
			}
		}
		if r.Supplied != supplied || r.Confirmed != confirmed || r.Reserved != reserved || r.Ordered != confirmed {
			t.Fatalf("%s: report %+v, model supplied %d confirmed %d reserved %d", where, r, supplied, confirmed, reserved)
		}
	}
}
