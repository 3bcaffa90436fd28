package backendkit

import "github.com/lockx-go/lockx/lockx"

// Watcher is one waiting attempt's registration (driver.Notifier's Watch):
// a wake-up channel of capacity one, the waiting owner, and X, whatever
// else the backend keeps about the registration.
type Watcher[X any] struct {
	Owner lockx.Owner
	X     X
	ch    chan struct{}
	seq   uint64 // registration order: WakeFirst wakes the lowest
}

// C is the channel Watch returns: it receives a value for every wake-up not
// yet taken, at most one at a time.
func (w *Watcher[X]) C() <-chan struct{} { return w.ch }

// Wake sends a wake-up without blocking; one already pending absorbs it
// (the woken attempt looks at the key once, whatever woke it).
func (w *Watcher[X]) Wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Pending reports whether a wake-up waits in w's channel, not yet taken.
func (w *Watcher[X]) Pending() bool { return len(w.ch) > 0 }

// Registry holds the watchers of each key K, by owner, so that a targeted
// wake-up (a fair queue's head, the readers or permit requests that can now
// be granted) costs a lookup per woken owner, not a pass over every watcher.
//
// A backend registers a watcher (Add) when the Client calls Watch, which it
// does before each attempt: a release that lands after the attempt's read
// then finds the watcher and wakes it, so no wake-up is lost between a
// refused attempt and the wait that follows it.
//
// A Registry is not safe for concurrent use: the backend guards it with the
// mutex that guards the state whose changes wake its watchers. The zero
// value is an empty Registry.
type Registry[K comparable, X any] struct {
	keys map[K]*watchSet[X]
	seq  uint64
}

type watchSet[X any] struct {
	byOwner map[lockx.Owner][]*Watcher[X]
	n       int
}

// Add registers a new watcher of key for owner and returns it.
func (r *Registry[K, X]) Add(key K, owner lockx.Owner) *Watcher[X] {
	if r.keys == nil {
		r.keys = make(map[K]*watchSet[X])
	}
	ws := r.keys[key]
	if ws == nil {
		ws = &watchSet[X]{byOwner: make(map[lockx.Owner][]*Watcher[X])}
		r.keys[key] = ws
	}
	r.seq++
	w := &Watcher[X]{Owner: owner, ch: make(chan struct{}, 1), seq: r.seq}
	ws.byOwner[owner] = append(ws.byOwner[owner], w)
	ws.n++
	return w
}

// Remove ends w's registration of key. It reports whether w was registered
// (false the second time: a cancel may run more than once).
func (r *Registry[K, X]) Remove(key K, w *Watcher[X]) bool {
	ws := r.keys[key]
	if ws == nil {
		return false
	}
	list := ws.byOwner[w.Owner]
	for i, x := range list {
		if x != w {
			continue
		}
		list[i] = list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if len(list) == 0 {
			delete(ws.byOwner, w.Owner)
		} else {
			ws.byOwner[w.Owner] = list
		}
		ws.n--
		if ws.n == 0 {
			delete(r.keys, key)
		}
		return true
	}
	return false
}

// Len returns how many watchers key has.
func (r *Registry[K, X]) Len(key K) int {
	if ws := r.keys[key]; ws != nil {
		return ws.n
	}
	return 0
}

// Keys calls fn with every key that has watchers.
func (r *Registry[K, X]) Keys(fn func(K)) {
	for k := range r.keys {
		fn(k)
	}
}

// Owners calls fn with every owner that watches key.
func (r *Registry[K, X]) Owners(key K, fn func(lockx.Owner)) {
	if ws := r.keys[key]; ws != nil {
		for o := range ws.byOwner {
			fn(o)
		}
	}
}

// Each calls fn with every watcher of key until fn returns false.
func (r *Registry[K, X]) Each(key K, fn func(*Watcher[X]) bool) {
	if ws := r.keys[key]; ws != nil {
		for _, list := range ws.byOwner {
			for _, w := range list {
				if !fn(w) {
					return
				}
			}
		}
	}
}

// Owned calls fn with every watcher of key registered for owner.
func (r *Registry[K, X]) Owned(key K, owner lockx.Owner, fn func(*Watcher[X])) {
	if ws := r.keys[key]; ws != nil {
		for _, w := range ws.byOwner[owner] {
			fn(w)
		}
	}
}

// All calls fn with every watcher of every key.
func (r *Registry[K, X]) All(fn func(*Watcher[X])) {
	for _, ws := range r.keys {
		for _, list := range ws.byOwner {
			for _, w := range list {
				fn(w)
			}
		}
	}
}

// WakeOwner wakes owner's watchers of key.
func (r *Registry[K, X]) WakeOwner(key K, owner lockx.Owner) {
	r.Owned(key, owner, (*Watcher[X]).Wake)
}

// WakeAll wakes every watcher of key.
func (r *Registry[K, X]) WakeAll(key K) {
	r.WakeIf(key, nil)
}

// WakeIf wakes the watchers of key that match (all if match is nil).
func (r *Registry[K, X]) WakeIf(key K, match func(*Watcher[X]) bool) {
	r.Each(key, func(w *Watcher[X]) bool {
		if match == nil || match(w) {
			w.Wake()
		}
		return true
	})
}

// WakeEvery wakes every watcher of every key: after a backend may have
// missed notifications (a reconnection), or when it closes, so that no
// waiter sleeps on a wake-up that can no longer come.
func (r *Registry[K, X]) WakeEvery() { r.All((*Watcher[X]).Wake) }

// WakeFirst wakes the longest-registered watcher of key, for a plain
// release: one waiter can take the lock, so waking all would only send the
// others after a lock the first one wins (plain waiters are not promised an
// order, but this keeps them from starving one another). With idle, a
// watcher that has a wake-up pending already is passed over, so that a
// wake-up passed on by a leaving watcher reaches someone new. WakeFirst
// reports whether it found a watcher.
func (r *Registry[K, X]) WakeFirst(key K, idle bool) bool {
	var first *Watcher[X]
	r.Each(key, func(w *Watcher[X]) bool {
		if (!idle || !w.Pending()) && (first == nil || w.seq < first.seq) {
			first = w
		}
		return true
	})
	if first == nil {
		return false
	}
	first.Wake()
	return true
}
