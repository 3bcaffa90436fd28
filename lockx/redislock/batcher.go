package redislock

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// batchFlights is how many calls or pipelines a batcher has on the wire at
// most. A call that finds fewer out goes out at once, alone, on a connection
// of its own from the client's pool, as it would without lockx: with no one
// to batch with, waiting for someone would only cost it a round trip. Calls
// queue only while batchFlights are out, and the first of them to come back
// sends the queue as one pipeline.
//
// With few callers (up to batchFlights) every call is a plain command, so
// batching never costs a caller anything; with many, batchFlights pipelines
// take turns with the server: one is being run while others are read and
// refilled. Asking go-redis's autopipeliner for several batches is no
// option: it is cached per client and the first caller's options win, so
// lockx would impose them on the application's own pipelining, and a
// WithTimeout clone, which caches one of its own, drops the client's hooks
// (tracing, metrics). docs/backends.md, "What batches, and how", has the
// measurements.
const batchFlights = 8

// batcher coalesces the commands of concurrent goroutines into pipelines of
// a go-redis client (pipe: rdb.Pipeline), so they run through the client's
// hooks and connection pools like any pipeline of the application's. It
// has no goroutine of its own. A call that finds fewer than batchFlights
// calls or pipelines out is sent at once by its own goroutine as a plain
// command (one: rdb.Process). Otherwise it waits in the queue; the first
// flight to come back hands the queue to the first of its calls, which
// sends it, its own call among them, as one pipeline.
// Each call keeps its own command, so its reply or error is its own; every
// caller waits for its reply, as with a plain client.
type batcher struct {
	pipe func() redis.Pipeliner
	one  func(ctx context.Context, cmd redis.Cmder) error

	mu     sync.Mutex
	queue  []*pending // not empty only while batchFlights are out
	flying int        // calls or pipelines on the wire, or being handed on
}

// pending is one call waiting in a batcher.
type pending struct {
	ctx context.Context
	cmd redis.Cmder
	// turn receives nil once cmd has its reply, or the batch (cmd's among
	// them) that this caller is to send.
	turn chan []*pending
}

var pendingPool = sync.Pool{New: func() any { return &pending{turn: make(chan []*pending, 1)} }}

// Process sends cmd at once if fewer than batchFlights calls are out, else
// in a pipeline with the commands of other goroutines waiting meanwhile,
// and returns when it has its reply.
func (b *batcher) Process(ctx context.Context, cmd redis.Cmder) error {
	b.mu.Lock()
	if b.flying < batchFlights {
		b.flying++
		b.mu.Unlock()
		b.sendOne(ctx, cmd)
		return cmd.Err()
	}
	p := pendingPool.Get().(*pending)
	p.ctx, p.cmd = ctx, cmd
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	if batch := <-p.turn; batch != nil {
		b.send(batch, p)
	}
	p.ctx, p.cmd = nil, nil
	pendingPool.Put(p)
	return cmd.Err()
}

// sendOne sends cmd alone, with its caller's context, and then hands on
// the calls that queued meanwhile, even if the client panics (see send).
func (b *batcher) sendOne(ctx context.Context, cmd redis.Cmder) {
	defer b.finish(nil, nil)
	_ = b.one(ctx, cmd)
}

// send runs batch, self's call among them, as one pipeline, tells the other
// callers their replies are in and hands the calls that queued meanwhile on.
// The pipeline does not end with the caller's context: the other calls in
// it are not the caller's to cancel. Like any command of the client it is
// bounded by the client's timeouts. If the pipeline panics (a hook of the
// application's, say) the panic goes on up the sender's goroutine, but
// only after every call of the batch has an error and the batcher has
// moved on: a panic recovered higher up (net/http recovers a handler's)
// must not leave the other callers waiting for ever.
func (b *batcher) send(batch []*pending, self *pending) {
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("redislock: the pipeline panicked: %v", r)
			for _, p := range batch {
				p.cmd.SetErr(err)
			}
			b.finish(batch, self)
			panic(r)
		}
	}()
	pipe := b.pipe()
	for _, p := range batch {
		_ = pipe.Process(p.ctx, p.cmd)
	}
	_, _ = pipe.Exec(context.WithoutCancel(self.ctx))
	b.finish(batch, self)
}

// finish tells batch's callers but self that their replies are in and hands
// the calls that queued meanwhile to the first of them, or ends the flight.
func (b *batcher) finish(batch []*pending, self *pending) {
	for _, p := range batch {
		if p != self {
			p.turn <- nil
		}
	}
	b.mu.Lock()
	next := b.queue
	b.queue = nil
	if next == nil {
		b.flying--
	}
	b.mu.Unlock()
	if next != nil {
		next[0].turn <- next
	}
}
