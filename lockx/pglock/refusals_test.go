package pglock

import (
	"testing"
	"time"
)

// TestRefusalsCache checks when a queued waiter's retry may be refused
// locally: only for the same request on the same key, before its blocker's
// lease or refusalCache runs out, and while no notification named it, woke
// every watcher of the key, or followed a listener reconnect.
func TestRefusalsCache(t *testing.T) {
	ask := refusal{hash: 7, kind: kindSem, mode: rowPermit, limit: 8, count: 1}
	fresh := func(r *refusals) {
		x := ask
		x.seq, x.ttl = r.seq, time.Minute
		r.refused("aa", x)
	}
	cases := []struct {
		name   string
		after  func(r *refusals)
		q      refusal
		cached bool
	}{
		{"nothing happened", func(*refusals) {}, ask, true},
		{"another owner named", func(r *refusals) { r.noted(7, []string{"bb"}) }, ask, true},
		{"another key woken", func(r *refusals) { r.noted(8, nil) }, ask, true},
		{"named", func(r *refusals) { r.noted(7, []string{"bb", "aa"}) }, ask, false},
		{"every watcher of the key woken", func(r *refusals) { r.noted(7, nil) }, ask, false},
		{"listener reconnected", func(r *refusals) { r.wokeAll() }, ask, false},
		{"granted or left", func(r *refusals) { r.forget("aa") }, ask, false},
		{"other limit", func(*refusals) {}, refusal{hash: 7, kind: kindSem, mode: rowPermit, limit: 9, count: 1}, false},
		{"other count", func(*refusals) {}, refusal{hash: 7, kind: kindSem, mode: rowPermit, limit: 8, count: 2}, false},
		{"other key", func(*refusals) {}, refusal{hash: 6, kind: kindSem, mode: rowPermit, limit: 8, count: 1}, false},
		{"other mode", func(*refusals) {}, refusal{hash: 7, kind: kindRW, mode: rowRead, limit: 8, count: 1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r refusals
			r.noted(7, []string{"aa"}) // before the refused decision: does not count
			fresh(&r)
			c.after(&r)
			ttl, ok := r.cached("aa", c.q)
			if ok != c.cached {
				t.Fatalf("cached = %v, want %v", ok, c.cached)
			}
			if ok && (ttl <= 0 || ttl > time.Minute) {
				t.Fatalf("ttl %v, want the blocker's remaining lease", ttl)
			}
		})
	}

	t.Run("expires", func(t *testing.T) {
		var r refusals
		x := ask
		x.ttl = 20 * time.Millisecond // the blocker's lease ends first
		r.refused("aa", x)
		if _, ok := r.cached("aa", ask); !ok {
			t.Fatal("not cached")
		}
		time.Sleep(30 * time.Millisecond)
		if _, ok := r.cached("aa", ask); ok {
			t.Fatal("cached past the blocker's lease")
		}
		x.ttl = time.Hour // bounded by refusalCache
		r.refused("aa", x)
		time.Sleep(refusalCache + 10*time.Millisecond)
		if _, ok := r.cached("aa", ask); ok {
			t.Fatal("cached past refusalCache")
		}
	})
	t.Run("unknown blocker", func(t *testing.T) {
		var r refusals
		r.refused("aa", ask) // ttl 0: no lease known to bound it
		if _, ok := r.cached("aa", ask); ok {
			t.Fatal("cached without a blocker's lease")
		}
	})
}
