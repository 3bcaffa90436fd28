package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockx-go/lockx/lockx/driver"

	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/stock/stocktest"
)

func TestStockConformance(t *testing.T) {
	e := newEnv(t, 8)
	stocktest.Run(t, e.backend(t))
}

func TestOrderStore(t *testing.T) {
	e := newEnv(t, 8)
	stocktest.RunOrders(t, pglock.NewOrderStore(e.pool, pglock.WithSchema(e.schema)))
}

// TestOrderStoreUpgrade: a schema made before the supply cap existed (no
// lockx_order_supply) keeps taking orders — the table is created on first
// use, and its SKUs are not capped until InitSupply, which counts the
// orders saved before it.
func TestOrderStoreUpgrade(t *testing.T) {
	e := newEnv(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := pglock.NewOrderStore(e.pool, pglock.WithSchema(e.schema))
	save := func(id string) error {
		return s.SaveOrder(ctx, driver.StockOrder{ID: id, SKU: "sku", User: id, Qty: 1, Unique: true})
	}
	if err := save("before"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, "DROP TABLE "+pgx.Identifier{e.schema, "lockx_order_supply"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := save("old-schema"); err != nil {
		t.Fatalf("an order on a schema without the cap's table: %v", err)
	}
	if _, _, err := s.Supply(ctx, "sku"); !errors.Is(err, driver.ErrNoStock) {
		t.Fatalf("Supply of a SKU without a cap: %v, want ErrNoStock", err)
	}
	if created, err := s.InitSupply(ctx, "sku", 3); err != nil || !created {
		t.Fatalf("InitSupply = %v, %v", created, err)
	}
	if sup, ord, err := s.Supply(ctx, "sku"); err != nil || sup != 3 || ord != 2 {
		t.Fatalf("Supply = %d, %d, %v; want 3 supplied, 2 ordered (the orders saved before the cap)", sup, ord, err)
	}
	if err := save("third"); err != nil {
		t.Fatal(err)
	}
	if err := save("fourth"); !errors.Is(err, driver.ErrSupplyExceeded) {
		t.Fatalf("an order beyond the cap: %v, want ErrSupplyExceeded", err)
	}
}
