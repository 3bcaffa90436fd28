package lockx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// LockInfo describes a held lock as its backend sees it (an Inspector's
// answer); one LockInfo is one owner's hold.
type LockInfo = driver.LockInfo

// ErrNoInspector reports a backend without the Inspector capability.
var ErrNoInspector = errors.New("lockx: backend cannot list locks (no Inspector)")

// ForceUnlock evicts the holder of key: it records the holder's token with
// the backend's FenceStore (resource = key) as seen, plus one, so that a
// resource fenced on key rejects the evicted holder's writes from now on,
// and then releases the lock as its owner would, which frees it, leaves
// its tombstone and wakes its waiters. It returns the evicted hold.
//
// It is an operator's tool for a holder that is stuck (its process hangs
// but keeps renewing). If the holder changes between the look-up and the
// release, the release is refused (owner-checked) and ForceUnlock returns
// ErrNotHeld: it never evicts a holder it did not report. Without a
// FenceStore the fence step is skipped; the backend needs an Inspector.
func ForceUnlock(ctx context.Context, b driver.Backend, key string) (LockInfo, error) {
	var in driver.Inspector
	if !driver.As(b, &in) {
		return LockInfo{}, keyError("force-unlock", key, ErrNoInspector)
	}
	info, err := in.Lock(ctx, key)
	if err != nil {
		return LockInfo{}, keyError("force-unlock", key, err)
	}
	if fs := (driver.FenceStore)(nil); driver.As(b, &fs) && info.Token.Valid() && info.Token < MaxToken {
		if err := fs.Fence(ctx, key, info.Token+1); err != nil && !errors.Is(err, ErrStaleToken) {
			return info, keyError("force-unlock", key, fmt.Errorf("bump fence: %w", err))
		}
	}
	if err := b.Release(ctx, key, info.Owner); err != nil {
		return info, keyError("force-unlock", key, err)
	}
	return info, nil
}

// LongHolderWatch configures WatchLongHolders.
type LongHolderWatch struct {
	// Prefix limits the watch to keys with this prefix.
	Prefix string
	// Threshold is the age from which a hold is reported.
	Threshold time.Duration
	// Interval between scans; default Threshold/4, at least one second.
	Interval time.Duration
	// OnLongHolder is called once per hold (key and token) when it is
	// found to be older than Threshold.
	OnLongHolder func(LockInfo)
}

// WatchLongHolders scans in's locks every Interval until ctx ends and calls
// w.OnLongHolder once for each hold older than w.Threshold: a stuck holder,
// or a lock forgotten by a process that keeps renewing it. Where the backend
// does not record grant times (Info.Age 0) a hold's age counts from the
// first scan that saw it, so it is reported up to one Interval late. It
// returns ctx's error, or the first scan error that is not ErrUnavailable
// (unavailable backends are retried at the next tick).
func WatchLongHolders(ctx context.Context, in driver.Inspector, w LongHolderWatch) error {
	if in == nil || w.OnLongHolder == nil || w.Threshold <= 0 {
		return &ArgError{Arg: "watch", Reason: "need an Inspector, OnLongHolder and a positive Threshold"}
	}
	iv := w.Interval
	if iv <= 0 {
		iv = max(w.Threshold/4, time.Second)
	}
	type hold struct {
		key   string
		token Token
	}
	firstSeen := map[hold]time.Time{}
	reported := map[hold]bool{}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		now := time.Now()
		seen := map[hold]bool{}
		err := in.Locks(ctx, w.Prefix, func(li LockInfo) bool {
			h := hold{li.Key, li.Token}
			seen[h] = true
			if _, ok := firstSeen[h]; !ok {
				firstSeen[h] = now.Add(-li.Age)
			}
			if li.Age == 0 {
				li.Age = now.Sub(firstSeen[h])
			}
			if li.Age >= w.Threshold && !reported[h] {
				reported[h] = true
				w.OnLongHolder(li)
			}
			return true
		})
		if err != nil && !errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
			return err
		}
		if err == nil {
			for h := range firstSeen {
				if !seen[h] {
					delete(firstSeen, h)
					delete(reported, h)
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
