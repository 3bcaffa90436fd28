package etcdlock

import (
	"context"
	"github.com/lockx-go/lockx/lockx/driver"
	"strconv"
	"strings"
	"time"
)

// Read/write holds are entries <prefix>rw<len>:<key>/h/<m><owner>, m being
// "r" or "w", so one owner can hold both sides for a moment (downgrade).
// Queued waiters are <dir>q/<m><owner> with the mode as value. A writer
// is granted when nobody else holds the key and it heads the queue; a
// reader when no other writer holds it and, if fair, no writer is queued
// ahead of it.

func rwRef(mode driver.RWMode, key string, owner driver.Owner) ref {
	m := "r"
	if mode == driver.ModeWrite {
		m = "w"
	}
	return ref{kind: kindRW, key: key, name: m + string(owner)}
}

func checkMode(mode driver.RWMode) error {
	if mode != driver.ModeRead && mode != driver.ModeWrite {
		return &driver.ArgError{Arg: "mode", Reason: "must be ModeRead or ModeWrite"}
	}
	return nil
}

// epoch is the read epoch a reader's entry records: its own token
// ("r", a fresh epoch) or a shared one ("r:<token>").
func epoch(e *entry) int64 {
	if s, ok := strings.CutPrefix(e.value, "r:"); ok {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	}
	return e.rev
}

func rwPolicy(mode driver.RWMode, req driver.Request) policy {
	owner := string(req.Owner)
	if mode == driver.ModeWrite {
		me := "w" + owner
		return policy{
			queue: true, ordered: true, qvalue: "w",
			decide: func(v *view, q *queued) (bool, string, error) {
				if v.holder("r"+owner) != nil {
					return false, "", driver.ErrUpgrade
				}
				if len(v.holders) > 0 {
					return false, "", nil
				}
				if len(v.queue) > 0 && v.queue[0].name != me {
					return false, "", nil
				}
				return true, "w", nil
			},
		}
	}
	return policy{
		queue: req.Fair, ordered: true, qvalue: "r",
		decide: func(v *view, q *queued) (bool, string, error) {
			if w := v.holder("w" + owner); w != nil {
				// Downgrade: granted whoever waits, and the read epoch is
				// our write's token.
				return true, "r:" + strconv.FormatInt(w.rev, 10), nil
			}
			value := "r"
			for i := range v.holders {
				if v.holders[i].name[0] == 'w' {
					return false, "", nil
				}
			}
			for i := range v.holders {
				if e := &v.holders[i]; e.name[0] == 'r' {
					value = "r:" + strconv.FormatInt(epoch(e), 10) // join the readers' epoch
					break
				}
			}
			if req.Fair {
				for _, e := range v.queue {
					if q != nil && e.rev >= q.rev {
						break
					}
					if e.name[0] == 'w' {
						return false, "", nil
					}
				}
			}
			return true, value, nil
		},
	}
}

// AcquireRW makes one attempt to grant mode on req.Key (driver.RWBackend).
func (b *Backend) AcquireRW(ctx context.Context, mode driver.RWMode, req driver.Request) (driver.Result, error) {
	if err := checkMode(mode); err != nil {
		return driver.Result{}, err
	}
	r := rwRef(mode, req.Key, req.Owner)
	res, err := b.attempt(ctx, r, req, rwPolicy(mode, req))
	if err != nil || !res.Acquired || mode == driver.ModeWrite {
		return res, err
	}
	// A reader's token is its epoch, recorded in its entry.
	if h := b.getHeld(r); h != nil {
		e := entry{value: h.value, rev: h.rev}
		if t, err := token(epoch(&e)); err == nil {
			res.Token = t
		}
	}
	return res, nil
}

// ExtendRW resets owner's mode hold on key to lease (driver.RWBackend).
func (b *Backend) ExtendRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner, lease time.Duration) error {
	if err := checkMode(mode); err != nil {
		return err
	}
	return b.extend(ctx, rwRef(mode, key, owner), lease)
}

// ReleaseRW frees owner's mode hold on key and withdraws owner from the
// key's queue (driver.RWBackend).
func (b *Backend) ReleaseRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner) error {
	if err := checkMode(mode); err != nil {
		return err
	}
	return b.release(ctx, rwRef(mode, key, owner))
}
