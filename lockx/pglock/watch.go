package pglock

import (
	"context"
	"encoding/hex"
	"github.com/lockx-go/lockx/lockx/driver"
	"strconv"
	"strings"
	"sync"
)

// watcher is one waiting attempt's wake-up channel. flagged (guarded by
// b.mu) says the watcher holds a reference on the key's wait flag; cancelled
// that its registration ended.
type watcher struct {
	owner     driver.Owner
	ownerHex  string
	ch        chan struct{}
	flagged   bool
	cancelled bool
	fair      bool // its last attempt was fair and flagged
}

// Watch implements driver.Notifier. Before it returns, this process is
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
	w := &watcher{owner: owner, ownerHex: hex.EncodeToString([]byte(owner)), ch: make(chan struct{}, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nil, unavailable("watch", errClosed)
	}
	ws := b.watch[hash]
	if ws == nil {
		ws = make(map[*watcher]struct{})
		b.watch[hash] = ws
	}
	ws[w] = struct{}{}
	b.mu.Unlock()
	remove := func() {
		b.mu.Lock()
		w.cancelled = true
		flagged := w.flagged
		if ws := b.watch[hash]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(b.watch, hash)
			}
		}
		b.mu.Unlock()
		if flagged {
			b.lst.unref(hash)
		}
	}
	b.prewarm(b.index(hash))
	b.prewarmWait()
	if err := b.lst.warm(ctx); err != nil {
		remove()
		return nil, nil, unavailable("watch", err)
	}
	var once sync.Once
	return w.ch, func() { once.Do(remove) }, nil
}

// watcherLocked returns a live watcher of owner on hash, nil if none.
// Callers hold b.mu.
func (b *Backend) watcherLocked(hash int64, owner driver.Owner) *watcher {
	var found *watcher
	for w := range b.watch[hash] {
		if w.owner == owner && !w.cancelled {
			if w.flagged {
				return w
			}
			found = w
		}
	}
	return found
}

// flag takes the wait flag of hash for w: from then on, a release of the
// key anywhere notifies this process.
func (b *Backend) flag(ctx context.Context, hash int64, w *watcher) error {
	if err := b.lst.ensure(ctx, hash); err != nil {
		return err
	}
	b.mu.Lock()
	if w.cancelled || w.flagged {
		b.mu.Unlock()
		b.lst.unref(hash)
		return nil
	}
	w.flagged = true
	b.mu.Unlock()
	return nil
}

// wakeLocked wakes the watchers of hash: only headHex's if given and
// present here, otherwise all. Callers hold b.mu.
func (b *Backend) wakeLocked(hash int64, headHex string) {
	b.wakeIfLocked(hash, func(w *watcher) bool { return headHex == "" || w.ownerHex == headHex })
}

// wakeReleasedLocked wakes the watchers of hash after a release by this
// process: all but the fair ones, which hold the wait flag and so are woken
// by the release's notification, and only the queue's head among them.
// Waking them all would send every local fair waiter after the lock at
// once, where all but the head are refused. Callers hold b.mu.
func (b *Backend) wakeReleasedLocked(hash int64) {
	b.wakeIfLocked(hash, func(w *watcher) bool { return !w.fair })
}

// wakeOwnerLocked wakes owner's watchers of hash. Callers hold b.mu.
func (b *Backend) wakeOwnerLocked(hash int64, owner driver.Owner) {
	b.wakeIfLocked(hash, func(w *watcher) bool { return w.owner == owner })
}

// wakeIfLocked wakes the watchers of hash that match. Callers hold b.mu.
func (b *Backend) wakeIfLocked(hash int64, match func(*watcher) bool) {
	for w := range b.watch[hash] {
		if match(w) {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

// wakeAll wakes every watcher: after the listener reconnected, any
// notification may have been missed.
func (b *Backend) wakeAll() {
	b.refs.wokeAll()
	b.mu.Lock()
	defer b.mu.Unlock()
	for hash := range b.watch {
		b.wakeLocked(hash, "")
	}
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
	var named []string
	if head != "" {
		named = strings.Fields(head)
	}
	b.refs.noted(hash, named) // before the wake-ups, which the retries follow
	b.mu.Lock()
	defer b.mu.Unlock()
	if head == "" {
		b.wakeLocked(hash, "")
		return
	}
	for o := range strings.SplitSeq(head, " ") {
		if o != "" {
			b.wakeLocked(hash, o)
		}
	}
}
