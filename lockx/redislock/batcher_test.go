package redislock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockx-go/lockx/internal/testenv"
)

// pipeWatch is a go-redis hook recording the pipelines of ECHO and INCR
// calls a client sends: how many, the largest, and the most on the wire at
// once. (A new connection's handshake is a pipeline of its own, nested in
// the one that waits for the connection; it is not counted.)
type pipeWatch struct {
	pipes, most, largest, flying atomic.Int64
}

func (w *pipeWatch) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (w *pipeWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (w *pipeWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if n := cmds[0].Name(); n != "echo" && n != "incr" {
			return next(ctx, cmds)
		}
		w.pipes.Add(1)
		raise(&w.largest, int64(len(cmds)))
		raise(&w.most, w.flying.Add(1))
		defer w.flying.Add(-1)
		return next(ctx, cmds)
	}
}

func raise(v *atomic.Int64, to int64) {
	for cur := v.Load(); to > cur && !v.CompareAndSwap(cur, to); cur = v.Load() {
	}
}

// TestBatcher: calls from many goroutines go out together, through the
// client's hooks, with at most batchFlights pipelines on the wire; each
// call gets its own reply or its own error; the batcher leaves no goroutine.
func TestBatcher(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), PoolSize: 16})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	notInt := "lockx-test:batcher:" + fmt.Sprint(time.Now().UnixNano())
	if err := rdb.Set(ctx, notInt, "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	var w pipeWatch
	rdb.AddHook(&w)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	b := &batcher{pipe: rdb.Pipeline, one: rdb.Process}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := range 200 {
				msg := fmt.Sprintf("%d/%d", g, i)
				if i%10 == 9 { // fails on its own: the key holds no integer
					cmd := redis.NewIntCmd(ctx, "incr", notInt)
					if err := b.Process(ctx, cmd); err == nil || !strings.Contains(err.Error(), "not an integer") {
						errs <- fmt.Errorf("call %s: INCR of a string: got %v, want its own error", msg, err)
						return
					}
					continue
				}
				cmd := redis.NewStringCmd(ctx, "echo", msg)
				if err := b.Process(ctx, cmd); err != nil || cmd.Val() != msg {
					errs <- fmt.Errorf("call %s: got %q, %v", msg, cmd.Val(), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d pipelines for 12,800 calls, largest %d, at most %d at once", w.pipes.Load(), w.largest.Load(), w.most.Load())
	if w.pipes.Load() == 0 {
		t.Fatal("the client's pipeline hook saw no pipeline")
	}
	if w.largest.Load() < 2 {
		t.Error("no pipeline carried more than one call")
	}
	if m := w.most.Load(); m > batchFlights {
		t.Errorf("%d pipelines were on the wire at once, want at most %d", m, batchFlights)
	}
	if b.flying != 0 || len(b.queue) != 0 {
		t.Errorf("idle batcher: %d pipelines out, %d calls queued", b.flying, len(b.queue))
	}
}

// TestBatcherFewCallers: with no more callers than batchFlights no call
// waits to be batched: each goes out at once as a plain command, so the
// client's pipeline hook sees no pipeline at all.
func TestBatcherFewCallers(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), PoolSize: batchFlights})
	t.Cleanup(func() { _ = rdb.Close() })
	var w pipeWatch
	rdb.AddHook(&w)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := &batcher{pipe: rdb.Pipeline, one: rdb.Process}
	var wg sync.WaitGroup
	var calls atomic.Int64
	for g := range batchFlights {
		wg.Go(func() {
			for i := range 500 {
				msg := fmt.Sprintf("%d/%d", g, i)
				cmd := redis.NewStringCmd(ctx, "echo", msg)
				if err := b.Process(ctx, cmd); err != nil || cmd.Val() != msg {
					t.Errorf("call %s: got %q, %v", msg, cmd.Val(), err)
					return
				}
				calls.Add(1)
			}
		})
	}
	wg.Wait()
	if calls.Load() != 500*batchFlights {
		t.Fatalf("%d of %d calls answered", calls.Load(), 500*batchFlights)
	}
	if n := w.pipes.Load(); n != 0 {
		t.Errorf("%d callers: %d pipelines sent, want every call sent alone", batchFlights, n)
	}
	if b.flying != 0 || len(b.queue) != 0 {
		t.Errorf("idle batcher: %d out, %d calls queued", b.flying, len(b.queue))
	}
}

// TestBatcherServerDown: when the pipeline cannot be sent, every call in it
// gets the error, and the batcher goes on with the next calls.
func TestBatcherServerDown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	// Pools larger than the failures: go-redis starts probing the server in
	// the background, for a second past Close, after PoolSize failed dials.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, PoolSize: 1000, PipelinePoolSize: 1000})
	defer func() { _ = rdb.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := &batcher{pipe: rdb.Pipeline, one: rdb.Process}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 16 {
		wg.Go(func() {
			for range 5 {
				if b.Process(ctx, redis.NewStatusCmd(ctx, "ping")) != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 80 {
		t.Fatalf("%d of 80 calls to a server that is down failed", n)
	}
	if b.flying != 0 || len(b.queue) != 0 {
		t.Errorf("idle batcher: %d pipelines out, %d calls queued", b.flying, len(b.queue))
	}
}

// panicky is a go-redis hook whose commands and pipelines panic while on
// is set.
type panicky struct{ on atomic.Bool }

func (h *panicky) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *panicky) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			panic("hook")
		}
		return next(ctx, cmd)
	}
}
func (h *panicky) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			panic("hook")
		}
		return next(ctx, cmds)
	}
}

// TestBatcherPanic: a call or pipeline that panics (an application's hook)
// panics its sender, as a plain call would, but every other call of the
// batch gets an error instead of waiting for ever, and the batcher goes on:
// a call sent alone hands on the calls queued behind it as well.
func TestBatcherPanic(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	var h panicky
	rdb.AddHook(&h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := &batcher{pipe: rdb.Pipeline, one: rdb.Process}
	h.on.Store(true)
	var wg sync.WaitGroup
	var panics, failed atomic.Int64
	for range 32 {
		wg.Go(func() {
			defer func() {
				if recover() != nil {
					panics.Add(1)
				}
			}()
			if err := b.Process(ctx, redis.NewStatusCmd(ctx, "ping")); err != nil && strings.Contains(err.Error(), "panicked") {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if panics.Load() == 0 || panics.Load()+failed.Load() != 32 {
		t.Fatalf("32 calls into panicking pipelines: %d senders panicked, %d calls failed", panics.Load(), failed.Load())
	}
	h.on.Store(false)
	if err := b.Process(ctx, redis.NewStatusCmd(ctx, "ping")); err != nil {
		t.Fatal("after the panics:", err)
	}
	if b.flying != 0 || len(b.queue) != 0 {
		t.Errorf("idle batcher: %d pipelines out, %d calls queued", b.flying, len(b.queue))
	}
}
