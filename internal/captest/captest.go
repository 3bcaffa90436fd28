// Package captest checks that backend wrappers keep capabilities: every
// capability interface of package lockx/driver is listed here, and Check
// asserts that a wrapper, put around each real backend, still offers (via
// driver.As) every capability the backend offers bare. A test in this
// package keeps the list equal to the interfaces declared in driver's
// source, so a capability added to driver fails the build of the list
// until it is registered, and then fails every wrapper that does not
// forward it.
package captest

import (
	"testing"

	"github.com/lockx-go/lockx/internal/backendtest"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Capability is one optional interface of package driver.
type Capability struct {
	Name string
	// Has reports whether driver.As finds the capability on b.
	Has func(b driver.Backend) bool
}

func has[C any](b driver.Backend) bool {
	var c C
	return driver.As(b, &c)
}

// Capabilities is every capability interface of package driver: every
// exported interface type it declares except Backend itself and the
// Standalone stores.
var Capabilities = []Capability{
	{"Notifier", has[driver.Notifier]},
	{"BatchExtender", has[driver.BatchExtender]},
	{"ExtendPartitioner", has[driver.ExtendPartitioner]},
	{"LossNotifier", has[driver.LossNotifier]},
	{"Passer", has[driver.Passer]},
	{"ManyAcquirer", has[driver.ManyAcquirer]},
	{"ManyReleaser", has[driver.ManyReleaser]},
	{"FenceStore", has[driver.FenceStore]},
	{"RWBackend", has[driver.RWBackend]},
	{"SemaphoreBackend", has[driver.SemaphoreBackend]},
	{"ResultStore", has[driver.ResultStore]},
	{"Inspector", has[driver.Inspector]},
	{"StockBackend", has[driver.StockBackend]},
	{"Clock", has[driver.Clock]},
}

// Standalone lists the interfaces of package driver that are not found on
// a backend but passed on their own (stock.WithOrders takes an OrderStore,
// and a SupplyCap is an OrderStore's own capability), so wrappers need not
// forward them.
var Standalone = []string{"OrderStore", "SupplyCap"}

// Of lists the names of the capabilities driver.As finds on b.
func Of(b driver.Backend) []string {
	var out []string
	for _, c := range Capabilities {
		if c.Has(b) {
			out = append(out, c.Name)
		}
	}
	return out
}

// Check puts wrap around each backend of backendtest.Names (memlock, Redis,
// PostgreSQL: the servers of internal/testenv) and fails t for every
// capability the bare backend has and the wrapped one lacks. It also fails
// if some capability is offered by none of the backends, since the check
// would then prove nothing for it.
func Check(t *testing.T, wrap func(driver.Backend) driver.Backend) {
	t.Helper()
	seen := map[string]bool{}
	for _, name := range backendtest.Names {
		bare := backendtest.Shared(t, name)()
		wrapped := wrap(bare)
		for _, c := range Capabilities {
			if !c.Has(bare) {
				continue
			}
			seen[c.Name] = true
			if !c.Has(wrapped) {
				t.Errorf("%s: wrapped in %T, the backend is no longer a driver.%s", name, wrapped, c.Name)
			}
		}
	}
	for _, c := range Capabilities {
		if !seen[c.Name] {
			t.Errorf("no backend of %v offers driver.%s: add one that does to backendtest, or the wrapper check proves nothing for it", backendtest.Names, c.Name)
		}
	}
}
