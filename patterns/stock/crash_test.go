package stock_test

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/stock"
)

// The crash tests SIGKILL a process in the middle of a purchase: a copy of
// the test binary (testenv.StartChild) sells from Redis with its orders in
// PostgreSQL, the production pairing, and dies at a chosen step.

const crashLease = time.Second

// crashStock opens the SKU as every process of the test does.
func crashStock(addr, prefix, dsn, schema, sku string, wrap func(driver.OrderStore) driver.OrderStore) (*stock.Stock, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	c := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)))
	orders := driver.OrderStore(pglock.NewOrderStore(pool, pglock.WithSchema(schema)))
	if wrap != nil {
		orders = wrap(orders)
	}
	s := stock.New(c, sku, stock.WithSegments(4), stock.WithOrders(orders), stock.WithPurchaseLease(crashLease))
	return s, func() { _ = c.Close(); pool.Close(); _ = rdb.Close() }, nil
}

// stallingOrders stops the purchase for good before (stage "taken") or
// after (stage "saved") the order is saved.
type stallingOrders struct {
	driver.OrderStore
	stage string
}

func (o stallingOrders) SaveOrder(ctx context.Context, order driver.StockOrder) error {
	if o.stage == "taken" {
		testenv.Say("stalled")
		select {}
	}
	if err := o.OrderStore.SaveOrder(ctx, order); err != nil {
		return err
	}
	testenv.Say("stalled")
	select {}
}

// The buyer: at stage "taken" or "saved" one purchase that stalls there
// until the process is killed; at stage "loop", purchase after purchase by
// new buyers, each reported, until killed.
var _ = testenv.Role("stock-buyer", func(args []string) error {
	addr, prefix, dsn, schema, sku, stage := args[0], args[1], args[2], args[3], args[4], args[5]
	var wrap func(driver.OrderStore) driver.OrderStore
	if stage != "loop" {
		wrap = func(o driver.OrderStore) driver.OrderStore { return stallingOrders{OrderStore: o, stage: stage} }
	}
	s, closeAll, err := crashStock(addr, prefix, dsn, schema, sku, wrap)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx := context.Background()
	if _, err := s.Init(ctx, 0); err != nil {
		return err
	}
	if stage != "loop" {
		_, err := s.Buy(ctx, "alice", 1)
		return errors.Join(errors.New("the stalled purchase returned"), err)
	}
	for i := 0; ; i++ {
		if _, err := s.Buy(ctx, "buyer-"+strconv.Itoa(i), 1); err != nil {
			return err
		}
		testenv.Say("bought %d", i+1)
	}
})

// TestCrashMidPurchase kills the buyer's process while its units are taken
// and its order not saved, after the order is saved and before the units
// are confirmed, and at a random moment of a sale. Once the purchase lease
// has passed and Expire has run, the ledger balances with nothing reserved,
// the order store agrees with it (no unit sold to no order, no order
// without units), and the killed buyer can buy again: its quota and its
// unique order slot were given back.
func TestCrashMidPurchase(t *testing.T) {
	addr := testenv.RedisAddr(t)
	for _, stage := range []string{"taken", "saved", "loop"} {
		t.Run(stage, func(t *testing.T) {
			schema, pools := pgPools(t, 1, 4)
			dsn := pools[0].Config().ConnString()
			prefix, sku := "lockxtest:"+randHex(4)+":", "sku-crash"
			t.Cleanup(func() { cleanRedis(addr, prefix) })
			s, closeAll, err := crashStock(addr, prefix, dsn, schema, sku, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer closeAll()
			ctx := ctxT(t, time.Minute)
			const supplied = 1000
			if _, err := s.Init(ctx, supplied); err != nil {
				t.Fatal(err)
			}
			buyer := testenv.StartChild(t, "stock-buyer", addr, prefix, dsn, schema, sku, stage)
			if stage == "loop" {
				buyer.Expect(t, "bought 20", 30*time.Second)
				time.Sleep(time.Duration(mrand.IntN(20)) * time.Millisecond)
			} else {
				buyer.Expect(t, "stalled", 30*time.Second)
			}
			buyer.Kill(t)
			bought := 0 // purchases the buyer saw succeed
			for _, line := range buyer.Output() {
				if n, ok := strings.CutPrefix(line, "bought "); ok {
					bought, _ = strconv.Atoi(n)
				}
			}
			time.Sleep(crashLease + 100*time.Millisecond)
			if _, err := s.Expire(ctx); err != nil {
				t.Fatal(err)
			}
			r, err := s.Reconcile(ctx)
			if err != nil {
				t.Fatalf("after the crash: %v", err)
			}
			if r.Reserved != 0 || r.Available+r.Confirmed != supplied || !r.OrdersMatch() {
				t.Fatalf("after the crash and Expire: %+v; want nothing reserved, available + confirmed = %d, orders = confirmed", r, supplied)
			}
			if r.Confirmed < int64(bought) || r.Confirmed > int64(bought)+1 {
				t.Fatalf("confirmed %d units, want the %d purchases reported (and at most the one in flight)", r.Confirmed, bought)
			}
			if stage != "loop" {
				if r.Confirmed != 0 {
					t.Fatalf("the killed purchase left %d units confirmed", r.Confirmed)
				}
				if _, err := s.Buy(ctx, "alice", 1); err != nil {
					t.Fatalf("the killed buyer buying again: %v", err)
				}
			}
		})
	}
}
