package lockx

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// maxLocalPasses bounds the local passes of one key in a row: after that
// many, the next hold to end releases the key at the backend and its
// successor in the LocalFirst queue acquires as usual, so a caller of
// another process that polls (TryAcquire) rather than queueing at the
// backend gets a chance at a key this Client keeps busy. A waiter queued at
// the backend needs no bound: the backend releases instead of passing
// while it waits (driver.Passer). At 16 the release and the fresh acquire
// add one round trip in 16 handoffs.
const maxLocalPasses = 16

// releaseKey frees r's key at the backend — or, for a LocalFirst lock on a
// driver.Passer backend, with another goroutine of this Client waiting at
// the key's gate, passes the lock straight to it in one call (pass).
func (r finalRelease) releaseKey(ctx context.Context) error {
	h := r.h
	c := h.c
	if c.passer != nil && h.plain && !r.lost {
		// The hold's gate goes with the pass: taken under c.mu, as Close
		// takes it, so that only one of them hands it on.
		c.mu.Lock()
		var w *gateWaiter
		gt := h.gate
		if gt != nil {
			if w = c.gates.claim(gt); w != nil {
				h.gate = nil
			}
		}
		c.mu.Unlock()
		if w != nil {
			return c.pass(ctx, h, gt, w)
		}
	}
	return releaseWithRetry(ctx, h.ops.Release, h.key, h.owner)
}

// pass hands h's lock and its gate gt to w, claimed from gt, and returns
// the outcome for h's release: nil once h's lock is passed or released.
//
// When the backend released instead (others wait there), or h did not hold
// the key, w gets the gate alone and acquires as usual. When the outcome is
// unknown, h's lock is released as Release retries it (a "not held" after
// the pass counts as success) and w acquires as usual too: Acquire is
// idempotent per owner, so it finds a grant the pass may have made. If w
// gave up meanwhile, whatever the pass may have granted it is freed.
func (c *Client) pass(ctx context.Context, h *hold, gt *gate, w *gateWaiter) error {
	start := time.Now()
	res, err := c.passer.Pass(ctx, h.key, h.owner, w.owner, w.lease)
	unknown := err != nil && !isNotHeld(err)
	if unknown {
		res = driver.Result{}
		err = retryRelease(ctx, h.ops.Release, h.key, h.owner, err)
	}
	if !c.gates.handOver(gt, w, passed{res, start}) && (res.Acquired || unknown) {
		c.abandon(&c.lockOps, driver.Request{Key: h.key, Owner: w.owner})
	}
	return err
}
