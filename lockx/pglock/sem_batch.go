package pglock

import (
	"context"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Semaphore decisions on one key are serialised by the key's decision lock,
// and under contention a decision spent most of its time queued for it
// behind the decisions of the same process: every acquisition and release
// took the lock on its own, each handing it on to the next through the
// server's lock manager. So the decisions of one process on one key are
// combined: while a transaction on the key is in flight, the decisions that
// arrive queue here, and the next transaction carries all of them, in
// arrival order, after one decision lock and one purge — each its own
// statement, so each sees the effect of those before it, as if they had run
// one after the other. The caller whose decision starts a transaction sends
// it (no goroutine of its own); when it ends, the first queued caller sends
// the next.

// semInFlight is how many combined transactions of one key a Backend sends
// at once: the second waits for the decision lock on the server while the
// first's reply travels back, so the lock is not left idle for a round trip.
const semInFlight = 2

// semState is a Backend's semaphore bookkeeping.
type semState struct {
	mu   sync.Mutex
	keys map[string]*semKey
	// waits holds this Backend's queued owners, per key hash and owner
	// (hex) (sem_local.go).
	waits map[int64]map[string]*semWait
}

// semKey is the combined decisions of one key: busy while a transaction is
// in flight, ops those waiting for the next.
type semKey struct {
	busy int
	ops  []*semOp
}

// semOp is one decision: queue adds its statements (with their result
// handlers) to the transaction's batch.
type semOp struct {
	queue func(batch *pgx.Batch)
	turn  chan semTurn // its outcome, or its turn to send the next transaction
}

type semTurn struct {
	lead bool
	err  error
}

// semDecide runs the statements queue adds in a decision transaction on
// key, combined with the other decisions of this Backend on key that are
// waiting (see above). The result handlers run before it returns.
func (b *Backend) semDecide(ctx context.Context, op, key string, queue func(batch *pgx.Batch)) error {
	s := &b.sem
	o := &semOp{queue: queue, turn: make(chan semTurn, 1)}
	s.mu.Lock()
	if s.keys == nil {
		s.keys = make(map[string]*semKey)
	}
	k := s.keys[key]
	if k == nil {
		k = &semKey{}
		s.keys[key] = k
	}
	lead := k.busy < semInFlight
	if lead {
		k.busy++
	} else {
		k.ops = append(k.ops, o)
	}
	s.mu.Unlock()
	if !lead {
		var t semTurn
		select {
		case t = <-o.turn:
		case <-ctx.Done():
			s.mu.Lock()
			if i := slices.Index(k.ops, o); i >= 0 { // not sent: withdraw
				k.ops = slices.Delete(k.ops, i, i+1)
				s.mu.Unlock()
				return backendkit.Ended(ctx, op)
			}
			s.mu.Unlock()
			t = <-o.turn // in flight, or our turn to send: see it through
		}
		if !t.lead {
			return t.err
		}
	}
	s.mu.Lock()
	ops := append([]*semOp{o}, k.ops...) // o arrived first, or found none waiting
	k.ops = nil
	s.mu.Unlock()
	// The transaction carries other callers' decisions: it is bounded by
	// the Backend's timeouts, not by this caller's context.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.connectTimeout+b.cfg.stmtTimeout)
	err := b.patternTx(tctx, op, kindSem, key, func(c *pgx.Conn, hash, lock int64) error {
		batch := &pgx.Batch{}
		b.semHead(batch, hash, lock)
		for _, x := range ops {
			x.queue(batch)
		}
		return c.SendBatch(tctx, batch).Close()
	})
	cancel()
	for _, x := range ops {
		if x != o {
			x.turn <- semTurn{err: err}
		}
	}
	s.mu.Lock()
	if len(k.ops) > 0 { // the first waiting sends the next, in this slot
		next := k.ops[0]
		k.ops = k.ops[1:]
		next.turn <- semTurn{lead: true}
	} else if k.busy--; k.busy == 0 {
		delete(s.keys, key)
	}
	s.mu.Unlock()
	return err
}
