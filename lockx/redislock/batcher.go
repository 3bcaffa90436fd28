package redislock

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// batchFlights is how many pipelines a batcher has on the wire at most.
// One goes out as soon as none is; while f are, the next goes out once
// 4f-2 calls wait (2, 6, 10): the more pipelines are out, the more calls a
// new one must carry to be worth its system calls. Otherwise calls wait for
// a pipeline to come back and go out together then.
//
// go-redis's blocking autopipeliner sends one batch (of up to 300 calls) at
// a time by default: Redis runs the batch's scripts while the client waits,
// then the client reads the replies and its goroutines make their next
// calls while Redis waits, so the two take turns. With several batches on
// the wire, one is being run while others are read and refilled:
// uncontended acquire + release pairs rose from 39k to 50k a second with 16
// goroutines and from 58–62k to 83–85k with 64, on two cores
// (docs/backends.md, "Several batches on the wire"). Asking go-redis's
// autopipeliner for several batches is no option: it is cached per client
// and the first caller's options win, so lockx would impose them on the
// application's own pipelining, and a WithTimeout clone, which caches one
// of its own, drops the client's hooks (tracing, metrics).
const batchFlights = 4

// batcher coalesces the commands of concurrent goroutines into pipelines of
// a go-redis client (pipe: rdb.Pipeline), so they run through the client's
// hooks and connection pools like any pipeline of the application's. It
// has no goroutine of its own: a caller that finds the line free sends the
// waiting calls, its own among them, as one pipeline, and when that
// pipeline's replies are in, hands whatever queued up meanwhile to the
// first of those callers to send next. While pipelines are on the wire new
// calls wait in the queue, unless enough of them are waiting to send one
// more (batchFlights): then the last to arrive sends them.
// Each call keeps its own command, so its reply or error is its own; every
// caller waits for its reply, as with a plain client.
type batcher struct {
	pipe func() redis.Pipeliner

	mu     sync.Mutex
	queue  []*pending
	flying int // pipelines on the wire, or being handed on
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

// Process sends cmd in a pipeline with the commands of other goroutines
// under way at the same time and returns when it has its reply.
func (b *batcher) Process(ctx context.Context, cmd redis.Cmder) error {
	p := pendingPool.Get().(*pending)
	p.ctx, p.cmd = ctx, cmd
	b.mu.Lock()
	b.queue = append(b.queue, p)
	var batch []*pending
	if b.flying == 0 || (b.flying < batchFlights && len(b.queue) >= 4*b.flying-2) {
		b.flying++
		batch, b.queue = b.queue, nil
	}
	b.mu.Unlock()
	if batch == nil {
		batch = <-p.turn
	}
	if batch != nil {
		b.send(batch, p)
	}
	p.ctx, p.cmd = nil, nil
	pendingPool.Put(p)
	return cmd.Err()
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
