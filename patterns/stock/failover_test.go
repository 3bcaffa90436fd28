package stock_test

import (
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/stock"
)

// TestSentinelFailoverMidSale sells from a Redis Sentinel set-up with the
// orders in PostgreSQL, and fails the master over in the middle of the
// sale with purchases it never replicated (its replicas SIGSTOPped and
// their links dropped, the master SIGKILLed, a replica promoted): the new master has lost those
// purchases' ledger entries and their buyers' quota counters.
//
// The buyers whose quota was lost try again: the order store's UNIQUE
// (sku, buyer) index refuses each second order (ErrLimit) and the units go
// back, so no buyer holds two orders and the ledger stays balanced. New
// buyers then buy until the sale is sold out: the lost entries' units are
// available again in the ledger, and the order store's supply cap refuses
// the orders that would sell them a second time (ErrSoldOut), so exactly
// the supplied units end up in live orders. The lost purchases are not
// hidden: Reconcile reports the order store ahead of the ledger by exactly
// the units the failover lost (OrdersMatch false), and those units as
// available in the ledger but unsellable.
//
// Without WithSupplyCap the test fails: 110 units in live
// orders for 100 supplied.
func TestSentinelFailoverMidSale(t *testing.T) {
	if testing.Short() {
		t.Skip("a Sentinel failover takes several seconds")
	}
	sen := testenv.StartSentinel(t)
	schema, pools := pgPools(t, 1, 4)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sen.MasterName, SentinelAddrs: sen.SentinelAddrs,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	c := lockx.New(redislock.New(rdb, redislock.WithPrefix("lockxtest:failover:")))
	t.Cleanup(func() { _ = c.Close() })
	s := stock.New(c, "sku-failover", stock.WithSegments(4), stock.WithOrders(pglock.NewOrderStore(pools[0], pglock.WithSchema(schema))), stock.WithSupplyCap())
	ctx := ctxT(t, 2*time.Minute)
	const supplied, before, unreplicated = 100, 20, 10
	if _, err := s.Init(ctx, supplied); err != nil {
		t.Fatal(err)
	}
	buyer := func(i int) string { return "buyer-" + strconv.Itoa(i) }
	for i := range before {
		if _, err := s.Buy(ctx, buyer(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Do(ctx, "WAIT", len(sen.Replicas), 5000).Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range sen.Replicas {
		if err := syscall.Kill(r.Pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(r.Pid, syscall.SIGCONT) })
	}
	// The master drops its replication links, so that what follows cannot
	// wait in a stopped replica's socket buffer and arrive after all.
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	for i := before; i < before+unreplicated; i++ {
		if _, err := s.Buy(ctx, buyer(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	old := sen.Master.Addr
	sen.Master.Kill()
	for _, r := range sen.Replicas {
		if err := syscall.Kill(r.Pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(40 * time.Second); sen.MasterAddr(t) == old; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no failover within 40 s")
		}
	}

	// Every buyer of the sale tries again, until the new master answers.
	for i := range before + unreplicated {
		for {
			_, err := s.Buy(ctx, buyer(i), 1)
			if errors.Is(err, lockx.ErrUnavailable) && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if !errors.Is(err, stock.ErrLimit) {
				t.Fatalf("%s buying again after the failover: %v, want ErrLimit", buyer(i), err)
			}
			break
		}
	}
	r, err := s.Reconcile(ctx)
	if err != nil {
		t.Fatalf("the ledger after the failover: %v", err)
	}
	lost := r.Ordered - r.Confirmed
	t.Logf("after the failover: %+v; the order store is ahead of the ledger by %d units", r, lost)
	if r.Ordered != before+unreplicated || lost != unreplicated || r.OrdersMatch() {
		t.Fatalf("Reconcile after the failover: %+v; want %d units ordered, %d of them lost by the ledger, OrdersMatch false",
			r, before+unreplicated, unreplicated)
	}

	// New buyers buy until the sale is sold out: the ledger offers its 70
	// unsold units and the 10 it lost; the cap lets exactly 70 through.
	var sold, refused, capped int
	for i := before + unreplicated; refused < 2*unreplicated; i++ {
		_, err := s.Buy(ctx, buyer(i), 1)
		switch {
		case err == nil:
			sold++
		case errors.Is(err, stock.ErrSoldOut):
			refused++
			if errors.Is(err, driver.ErrSupplyExceeded) {
				capped++
			}
		default:
			t.Fatalf("%s buying after the failover: %v", buyer(i), err)
		}
		if i > 10*supplied {
			t.Fatalf("%d units sold after the failover and still no end: an oversell", sold)
		}
	}
	live := func() (units, dups int) {
		t.Helper()
		orders := pgx.Identifier{schema, "lockx_orders"}.Sanitize()
		err := pools[0].QueryRow(ctx, "SELECT (SELECT coalesce(sum(qty), 0) FROM "+orders+" WHERE state = 'live'), "+
			"(SELECT count(*) FROM (SELECT buyer FROM "+orders+" WHERE state = 'live' GROUP BY sku, buyer HAVING count(*) > 1) d)").Scan(&units, &dups)
		if err != nil {
			t.Fatal(err)
		}
		return units, dups
	}
	units, dups := live()
	t.Logf("after the failover: %d sold to new buyers, then %d refused (%d of them by the supply cap); %d units in live orders",
		sold, refused, capped, units)
	if units != supplied || dups != 0 || sold != supplied-before-unreplicated || capped == 0 {
		t.Fatalf("%d units in live orders (%d sold after the failover), %d buyers with two, %d refusals by the cap; "+
			"want %d units — no oversell —, %d sold, 0, and the cap refusing the units the ledger lost",
			units, sold, dups, capped, supplied, supplied-before-unreplicated)
	}
	r, err = s.Reconcile(ctx)
	t.Logf("at the end: %+v; %d units available in the ledger are unsellable", r, r.Unsellable())
	if err != nil || r.Ordered != supplied || r.Cap != supplied || r.Ordered-r.Confirmed != unreplicated ||
		r.Available != unreplicated || r.Unsellable() != unreplicated || r.OrdersMatch() {
		t.Fatalf("Reconcile at the end: %+v (unsellable %d), %v; want %d units ordered of a cap of %d, the ledger %d units behind, "+
			"%d available and all unsellable", r, r.Unsellable(), err, supplied, supplied, unreplicated, unreplicated)
	}
}
