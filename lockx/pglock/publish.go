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

// sqlHeldAnywhere is 1 when some session of this database holds the
// advisory lock $1 exclusively.
const sqlHeldAnywhere = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
	WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.mode = 'ExclusiveLock' AND l.granted
	AND l.classid::int8 = (($1::int8 >> 32) & 4294967295) AND l.objid::int8 = ($1::int8 & 4294967295)
	AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))`

// publishWindow is how long after a grant its row may still be missing: the
// publish delay twice over, and room for the write to run.
func (b *Backend) publishWindow() time.Duration { return 2*b.cfg.publishDelay + 20*time.Millisecond }

// lookAgain runs a check through the lock table (try) that found no row for
// hash. If the key's advisory lock is held, by a hold that may be too young
// to have written its row, it tries again until the row would surely be
// there; found reports whether a try found what it looked for.
func (b *Backend) lookAgain(ctx context.Context, op string, hash int64, try func() (found bool, err error)) (bool, error) {
	if b.cfg.publishDelay == 0 {
		return false, nil
	}
	var held bool
	if err := b.pool.QueryRow(ctx, sqlHeldAnywhere, hash).Scan(&held); err != nil {
		return false, backendkit.Unavailable(op, err)
	}
	if !held {
		return false, nil
	}
	deadline := time.Now().Add(b.publishWindow())
	t := time.NewTimer(b.cfg.publishDelay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, backendkit.Ended(ctx, op)
		case <-t.C:
		}
		found, err := try()
		if found || err != nil || !time.Now().Before(deadline) {
			return found, err
		}
		t.Reset(b.cfg.publishDelay)
	}
}
