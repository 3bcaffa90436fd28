package pglock

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"

	"github.com/lockx-go/lockx/lockx"
)

// watcher is one waiting attempt's wake-up channel.
type watcher struct {
	ownerHex string
	ch       chan struct{}
}

// Watch implements lockx.Notifier. Before it returns, this process is
// listening on the schema's channel and holds the key's wait flag, so a
// release anywhere after that notifies it. Wake-ups come from releases in
// this process directly and from other processes through one LISTEN
// connection per Backend, however many keys are awaited. A notification
// naming the head of the key's fair queue wakes only that owner.
func (b *Backend) Watch(ctx context.Context, key string, owner lockx.Owner) (<-chan struct{}, func(), error) {
	hash := b.hash(key)
	w := &watcher{ownerHex: hex.EncodeToString([]byte(owner)), ch: make(chan struct{}, 1)}
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
		if ws := b.watch[hash]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(b.watch, hash)
			}
		}
		b.mu.Unlock()
	}
	b.prewarm(b.index(hash))
	if err := b.lst.ensure(ctx, hash); err != nil {
		remove()
		return nil, nil, unavailable("watch", err)
	}
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			remove()
			b.lst.unref(hash)
		})
	}, nil
}

// wakeLocked wakes the watchers of hash: only headHex's if given and
// present here, otherwise all. Callers hold b.mu.
func (b *Backend) wakeLocked(hash int64, headHex string) {
	ws := b.watch[hash]
	for w := range ws {
		if headHex == "" || w.ownerHex == headHex {
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
