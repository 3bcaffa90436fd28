package stocktest_test

import (
	"testing"

	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/stock/stocktest"
)

// A driver.StockBackend checks its segmented stock with one call in its own
// test file; this one checks memlock's. The suite uses SKUs of its own, so
// the backend may share a store with other tests.
func Example() {
	conformance := func(t *testing.T) {
		stocktest.Run(t, memlock.New())
	}
	_ = conformance // in a _test.go file: func TestStockConformance(t *testing.T) { … }
}
