package lockx

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestExpiriesHeap: after any sequence of adds, updates and removals the
// validity heap is ordered, every hold in it knows its index, every hold
// out of it has index -1, and the timer is due by the earliest validity.
func TestExpiriesHeap(t *testing.T) {
	var e expiries
	defer e.stop()
	base := time.Now().Add(time.Hour) // never fires during the test
	holds := make([]*hold, 64)
	for i := range holds {
		holds[i] = &hold{expIdx: -1}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for step := range 5000 {
		h := holds[r.IntN(len(holds))]
		at := base.Add(time.Duration(r.IntN(1000)) * time.Millisecond)
		switch {
		case h.expIdx < 0:
			e.add(h, at)
		case r.IntN(2) == 0:
			e.update(h, at)
		default:
			e.remove(h)
		}
		if err := e.check(); err != "" {
			t.Fatalf("step %d: %s", step, err)
		}
		in := 0
		for _, h := range holds {
			if h.expIdx >= 0 {
				in++
			}
		}
		if in != len(e.heap) {
			t.Fatalf("step %d: %d holds think they are in a heap of %d", step, in, len(e.heap))
		}
	}
}

// check returns what is wrong with e's heap, or "".
func (e *expiries) check() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, x := range e.heap {
		if x.h.expIdx != i {
			return fmt.Sprintf("entry %d has index %d", i, x.h.expIdx)
		}
		if p := (i - 1) / 2; i > 0 && x.at.Before(e.heap[p].at) {
			return fmt.Sprintf("entry %d earlier than its parent", i)
		}
	}
	if len(e.heap) > 0 && e.at.After(e.heap[0].at) {
		return fmt.Sprintf("timer due %v after the earliest validity", e.at.Sub(e.heap[0].at))
	}
	return ""
}
