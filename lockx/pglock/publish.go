package pglock

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// A plain exclusive grant takes the advisory lock and draws the fencing
// token, and nothing more: the holder's row in lockx_held, which lets other
// processes see and check the holder, is written only once the hold has
// lasted the publish delay (WithPublishDelay), or at its first Extend. A
// hold released sooner — every hold of a hot key — never writes a row, and
// its handoff costs the server the lock, the token and the unlock.
//
// Order on the session keeps this sound: the row's write is queued on the
// hold's session under b.mu, and only while the hold is neither gone nor
// being reaped; everything that ends the hold later is queued after it, and
// a published hold's release marks its row released (stReleasePub), so a
// row never names an owner whose hold has ended while its session holds the
// key again for someone else.

// armPublish starts h's publish timer, or marks h published when its grant
// wrote the row. Callers hold b.mu.
func (b *Backend) armPublish(h *hold, rowWritten bool) {
	if rowWritten || b.cfg.publishDelay == 0 {
		h.published = true
		return
	}
	h.pub = time.AfterFunc(b.cfg.publishDelay, func() { b.publish(h) })
}

func (h *hold) stopPublish() {
	if h.pub != nil {
		h.pub.Stop()
	}
}

// publish is h's publish timer: it queues the write of h's row with the
// lease h has left.
func (b *Backend) publish(h *hold) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.gone || h.published || h.reaping || b.closed {
		return
	}
	b.publishOp(h, h.remaining(time.Now()), nil)
}

// publishOp queues the write of h's row with lease left on h's session and
// marks h published; fin, if set, gets the result. A write that fails leaves
// h unpublished, so that its next Extend writes it. Callers hold b.mu.
func (b *Backend) publishOp(h *hold, lease time.Duration, fin func(result)) bool {
	h.published = true
	h.stopPublish()
	o := &op{stmt: stPublish, args: [][]byte{i8(h.hash), []byte(h.key), []byte(h.owner), i8(int64(h.token)),
		i8(ms(lease)), i8(time.Since(h.since).Milliseconds())}}
	o.fin = func(r result) {
		if r.err != nil {
			b.mu.Lock()
			h.published = false
			b.mu.Unlock()
		}
		if fin != nil {
			fin(r)
		}
	}
	if !h.sess.enqueue(o) {
		h.published = false
		return false
	}
	return true
}

// sqlYoung tells who holds the advisory lock $1 exclusively, in this
// database: 0 nobody, 1 a session a live row of the lock table names (a
// published hold), 2 a session no live row names — a hold too young to
// have written its row (or a lock taken outside pglock).
const sqlYoung = `SELECT coalesce(max(CASE WHEN EXISTS (SELECT 1 FROM {held} h WHERE h.hash = $1::int8 AND h.pid = l.pid
		AND h.expires > clock_timestamp()) THEN 1 ELSE 2 END), 0)::int8
	FROM pg_catalog.pg_locks l
	WHERE ` + sqlExclusiveAdvisory + `
	AND l.classid::int8 = (($1::int8 >> 32) & 4294967295) AND l.objid::int8 = ($1::int8 & 4294967295)`

// publishWindow is how long after a grant its row may still be missing: the
// publish delay twice over, and room for the write to run.
func (b *Backend) publishWindow() time.Duration { return 2*b.cfg.publishDelay + 20*time.Millisecond }

// loadAllowance is how much lookAgain's window grows per round trip of its
// own checks: on a loaded machine the holder's publish write (a timer, the
// session goroutine, a statement) runs late by about as much as any
// statement does, so a window of fixed length turned a true owner's
// force-release into ErrNotHeld under make test's load (four packages with
// -race beside the server). Quiet, a check takes a fraction of a
// millisecond and the window stays publishWindow.
const loadAllowance = 4

// lookWindow is publishWindow grown by loadAllowance times rtt, the slowest
// round trip of the reader's own checks so far.
func (b *Backend) lookWindow(rtt time.Duration) time.Duration {
	return b.publishWindow() + loadAllowance*rtt
}

// lookAgain runs a check through the lock table (try) that found no row for
// hash again, for as long as the key is held by a hold too young to have
// written its row (sqlYoung, asked on the key's holder session), and at
// most publishWindow; found reports whether a try found what it looked
// for. A free key is answered at once, and a key held by a published hold
// after one more try (its row may have been written since the first). The
// window grows with the slowest of its checks' round trips (loadAllowance).
func (b *Backend) lookAgain(ctx context.Context, opName string, hash int64, try func() (found bool, err error)) (bool, error) {
	if b.cfg.publishDelay == 0 {
		return false, nil
	}
	start := time.Now()
	deadline := start.Add(b.publishWindow())
	t := time.NewTimer(b.cfg.publishDelay)
	defer t.Stop()
	for {
		sent := time.Now()
		r, err := b.remoteCall(ctx, opName, hash, stYoung, [][]byte{i8(hash)})
		now := time.Now()
		if d := start.Add(b.lookWindow(now.Sub(sent))); d.After(deadline) {
			deadline = d
		}
		switch {
		case err != nil:
			return false, err
		case r.val(0) == 0 || !now.Before(deadline):
			return false, nil // free (a hold begun since is not the one looked for), or waited long enough
		case r.val(0) == 1:
			return try() // published, perhaps since the last try
		}
		select {
		case <-ctx.Done():
			return false, backendkit.Ended(ctx, opName)
		case <-t.C:
		}
		found, err := try()
		if found || err != nil {
			return found, err
		}
		t.Reset(b.cfg.publishDelay)
	}
}
