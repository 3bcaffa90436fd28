package shop

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stats are the live counters the page shows. Replicas started in one
// process (the load generator's -replicas) share one Stats.
type Stats struct {
	Paid          atomic.Int64 // orders paid (Buy or a confirmed reservation)
	Reserved      atomic.Int64 // reservations made
	SoldOut       atomic.Int64 // answers "sold out"
	Busy          atomic.Int64 // answers "busy, retry"
	StaleRejected atomic.Int64 // admin writes refused by the fencing middleware (409)
	Restocks      atomic.Int64 // admin restocks accepted
	ExpiredUnits  atomic.Int64 // units returned by the expiry job
	CronRuns      atomic.Int64 // runs of the expiry job (all replicas)
	CronSkips     atomic.Int64 // triggers a replica skipped because another ran them

	mu       sync.Mutex
	buckets  [rateBuckets]int64
	stamps   [rateBuckets]int64
	triggers map[int64]int // expiry-job trigger (unix ms) → runs
	dupRuns  int
}

const (
	rateBuckets = 16
	rateSlot    = 250 * time.Millisecond
	rateWindow  = 8 // slots summed: 2 s
)

// NewStats returns zeroed counters.
func NewStats() *Stats { return &Stats{triggers: map[int64]int{}} }

func (s *Stats) paid(now time.Time) {
	s.Paid.Add(1)
	slot := now.UnixNano() / int64(rateSlot)
	s.mu.Lock()
	i := slot % rateBuckets
	if s.stamps[i] != slot {
		s.stamps[i], s.buckets[i] = slot, 0
	}
	s.buckets[i]++
	s.mu.Unlock()
}

// OrdersPerSecond is the rate of paid orders over the last two seconds.
func (s *Stats) OrdersPerSecond(now time.Time) float64 {
	slot := now.UnixNano() / int64(rateSlot)
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k := int64(1); k <= rateWindow; k++ { // complete slots only
		i := (slot - k) % rateBuckets
		if s.stamps[i] == slot-k {
			n += s.buckets[i]
		}
	}
	return float64(n) / (rateWindow * rateSlot).Seconds()
}

func (s *Stats) cronRun(trigger time.Time) {
	s.CronRuns.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := trigger.UnixMilli()
	s.triggers[k]++
	if s.triggers[k] > 1 {
		s.dupRuns++
	}
	if len(s.triggers) > 4096 {
		for t := range s.triggers {
			if t < k-3600_000 {
				delete(s.triggers, t)
			}
		}
	}
}

// DuplicateCronRuns counts runs of a trigger beyond the first (must be 0:
// cronguard runs each trigger once across the replicas).
func (s *Stats) DuplicateCronRuns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dupRuns
}
