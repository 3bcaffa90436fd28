// Package miniclock makes an embedded miniredis age its keys in real time.
// miniredis only expires keys when told to move its clock; lockx's leases,
// tombstones and reservations need them to expire as they would on Redis.
package miniclock

import (
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Follow advances mr's clock with real time every 5 ms until the returned
// func is called; that func waits for the goroutine to end.
func Follow(mr *miniredis.Miniredis) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return func() { close(quit); <-done }
}
