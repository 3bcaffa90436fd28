package pglock_test

import (
	"context"
	"errors"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/stock/stocktest"
	"testing"
	"time"
)

func TestStockConformance(t *testing.T) {
	e := newEnv(t, 8)
	stocktest.Run(t, e.backend(t))
}

func TestOrderStore(t *testing.T) {
	e := newEnv(t, 4)
	s := pglock.NewOrderStore(e.pool, pglock.WithSchema(e.schema))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := driver.StockOrder{ID: "o1", SKU: "sku", User: "u", Qty: 1, Unique: true}
	if err := s.SaveOrder(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveOrder(ctx, o); err != nil {
		t.Fatalf("saving the same order again: %v", err)
	}
	o2 := o
	o2.ID = "o2"
	if err := s.SaveOrder(ctx, o2); !errors.Is(err, driver.ErrDuplicateOrder) {
		t.Fatalf("second order of the buyer: %v, want ErrDuplicateOrder", err)
	}
	if n, err := s.OrderedUnits(ctx, "sku"); err != nil || n != 1 {
		t.Fatalf("OrderedUnits = %d, %v", n, err)
	}
	if err := s.CancelOrder(ctx, "sku", "o1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveOrder(ctx, o2); err != nil {
		t.Fatalf("order after cancellation: %v", err)
	}
	o3 := driver.StockOrder{ID: "o3", SKU: "sku", User: "u", Qty: 2}
	if err := s.SaveOrder(ctx, o3); err != nil {
		t.Fatalf("non-unique order: %v", err)
	}
	if n, err := s.OrderedUnits(ctx, "sku"); err != nil || n != 3 {
		t.Fatalf("OrderedUnits = %d, %v; want 3", n, err)
	}
}
