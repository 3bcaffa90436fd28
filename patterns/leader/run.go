package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// RunOption configures Run.
type RunOption func(*runConfig)

type runConfig struct {
	once    bool
	backoff time.Duration
}

// Once makes Run return after the first term instead of campaigning again.
func Once() RunOption { return func(c *runConfig) { c.once = true } }

// WithRetryBackoff sets how long Run waits before campaigning again after
// the backend could not be reached (default one second).
func WithRetryBackoff(d time.Duration) RunOption {
	return func(c *runConfig) {
		if d > 0 {
			c.backoff = d
		}
	}
}

// Run campaigns, calls fn while this instance leads and campaigns again
// when the term ends, until ctx ends. fn's context is cancelled when the
// term ends or ctx does; when fn returns, the term is resigned, so the next
// candidate takes over at once.
//
// Run returns ctx's cause when ctx ends, fn's error when fn fails while
// still leading (a failure is not a reason to give the office to someone
// else silently), and after the first term with Once (fn's error, or nil).
// A backend that cannot be reached is retried after a backoff.
func (e *Election) Run(ctx context.Context, fn func(ctx context.Context, t *Term) error, opts ...RunOption) error {
	if ctx == nil {
		return fmt.Errorf("leader: %w", &lockx.ArgError{Arg: "ctx", Reason: "nil"})
	}
	if fn == nil {
		return fmt.Errorf("leader: %w", &lockx.ArgError{Arg: "fn", Reason: "nil"})
	}
	rc := runConfig{backoff: time.Second}
	for _, o := range opts {
		if o != nil {
			o(&rc)
		}
	}
	for {
		t, err := e.Campaign(ctx)
		switch {
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case errors.Is(err, lockx.ErrUnavailable):
			if !sleep(ctx, rc.backoff) {
				return context.Cause(ctx)
			}
			continue
		case err != nil:
			return err
		}
		ferr, lost := e.serve(ctx, t, fn)
		if rc.once || ctx.Err() != nil {
			if ferr == nil && ctx.Err() != nil && !rc.once {
				return context.Cause(ctx)
			}
			return ferr
		}
		if ferr != nil && !lost {
			return ferr
		}
	}
}

// serve runs fn in term t and resigns; lost reports that the term ended
// before fn returned.
func (e *Election) serve(ctx context.Context, t *Term, fn func(context.Context, *Term) error) (error, bool) {
	fctx, cancel := context.WithCancelCause(t.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	ferr := fn(&termContext{Context: fctx, t: t}, t)
	stop()
	cancel(nil)
	lost := t.Context().Err() != nil
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.lease)
	defer rcancel()
	return errors.Join(ferr, t.Resign(rctx)), lost
}

func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
