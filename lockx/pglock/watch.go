package pglock

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// watcher is one waiting attempt's wake-up registration, its state guarded
// by b.mu.
type watcher = backendkit.Watcher[watchState]

// watchState is what pglock keeps about a watcher: flagged says it holds a
// reference on the key's wait flag; cancelled that its registration ended.
type watchState struct {
	ownerHex  string
	flagged   bool
	cancelled bool
	fair      bool // its last attempt was fair and flagged
}

// Watch implements lockx.Notifier. Before it returns, this process is
// listening on the schema's channel. Wake-ups come from releases in this
// process directly and from other processes through one LISTEN connection
// per Backend, however many keys are awaited. A notification naming the head
// of the key's fair queue wakes only that owner.
//
// The owner's next attempt (Acquire) decides how it waits: a plain waiter
// that gets a free wait session queues in PostgreSQL's own lock queue there
// (WithWaitSessions) and needs no notification; any other first takes the
// key's wait flag, before the attempt is sent, so that a release after the
// attempt notifies this process. Read/write releases, like plain ones,
// notify only when some process holds the key's wait flag; semaphore
// releases notify whether or not a flag is held.
func (b *Backend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	hash := b.hash(key)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nil, backendkit.Unavailable("watch", errClosed)
	}
	w := b.watch.Add(hash, owner)
	w.X.ownerHex = hex.EncodeToString([]byte(owner))
	b.mu.Unlock()
	remove := func() {
		b.mu.Lock()
		w.X.cancelled = true
		flagged := w.X.flagged
		b.watch.Remove(hash, w)
		b.mu.Unlock()
		if flagged {
			b.lst.unref(hash)
		}
	}
	b.prewarm(b.index(hash))
	b.prewarmWait()
	if err := b.lst.warm(ctx); err != nil {
		remove()
		return nil, nil, backendkit.Unavailable("watch", err)
	}
	var once sync.Once
	return w.C(), func() { once.Do(remove) }, nil
}

// watcherLocked returns a live watcher of owner on hash, nil if none.
// Callers hold b.mu.
func (b *Backend) watcherLocked(hash int64, owner driver.Owner) *watcher {
	var found *watcher
	b.watch.Owned(hash, owner, func(w *watcher) {
		if !w.X.cancelled && (found == nil || !found.X.flagged) {
			found = w
		}
	})
	return found
}

// flag takes the wait flag of hash for w: from then on, a release of the
// key anywhere notifies this process.
func (b *Backend) flag(ctx context.Context, hash int64, w *watcher) error {
	if err := b.lst.ensure(ctx, hash); err != nil {
		return err
	}
	b.mu.Lock()
	if w.X.cancelled || w.X.flagged {
		b.mu.Unlock()
		b.lst.unref(hash)
		return nil
	}
	w.X.flagged = true
	b.mu.Unlock()
	return nil
}

// wakeLocked wakes the watchers of hash: only headHex's if given and
// present here, otherwise all. Callers hold b.mu.
func (b *Backend) wakeLocked(hash int64, headHex string) {
	if headHex == "" {
		b.watch.WakeAll(hash)
		return
	}
	b.watch.WakeIf(hash, func(w *watcher) bool { return w.X.ownerHex == headHex })
}

// wakeReleasedLocked wakes the watchers of hash after a release by this
// process: all but the fair ones, which hold the wait flag and so are woken
// by the release's notification, and only the queue's head among them.
// Waking them all would send every local fair waiter after the lock at
// once, where all but the head are refused. Callers hold b.mu.
func (b *Backend) wakeReleasedLocked(hash int64) {
	b.watch.WakeIf(hash, func(w *watcher) bool { return !w.X.fair })
}

// wakeOwnerLocked wakes owner's watchers of hash. Callers hold b.mu.
func (b *Backend) wakeOwnerLocked(hash int64, owner driver.Owner) {
	b.watch.WakeOwner(hash, owner)
}

// wakeAll wakes every watcher: after the listener reconnected, any
// notification may have been missed.
func (b *Backend) wakeAll() {
	b.refs.wokeAll()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watch.WakeEvery()
}

// dispatch handles a notification: "<hash>" (every watcher of the key),
// "<hash> <head owner hex>" (the fair queue's head) or, from the read/write
// lock and semaphore statements, "<hash> <owner hex> <owner hex> …" (the
// waiters that can now be granted).
func (b *Backend) dispatch(payload string) {
	hs, head, _ := strings.Cut(payload, " ")
	hash, err := strconv.ParseInt(hs, 10, 64)
	if err != nil {
		return
	}
	b.wakeNamed(hash, strings.Fields(head))
}

// wakeNamed records a notification on hash naming owners (hex), or every
// watcher of the key if there are none, and wakes their watchers.
func (b *Backend) wakeNamed(hash int64, named []string) {
	b.refs.noted(hash, named) // before the wake-ups, which the retries follow
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(named) == 0 {
		b.wakeLocked(hash, "")
		return
	}
	for _, o := range named {
		b.wakeLocked(hash, o)
	}
}
