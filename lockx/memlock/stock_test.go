package memlock

import (
	"testing"

	"github.com/lockx-go/lockx/patterns/stock/stocktest"
)

func TestStockConformance(t *testing.T) {
	t.Run("Backend", func(t *testing.T) { stocktest.Run(t, New()) })
	t.Run("StockStore", func(t *testing.T) { stocktest.Run(t, NewStockStore()) })
}

func TestOrderStore(t *testing.T) { stocktest.RunOrders(t, NewOrderStore()) }
