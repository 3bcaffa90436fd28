package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/patterns/leader"
)

// The leader table (issue 36): how long a graceful handover takes — from
// the leader's Resign to the next candidate's Campaign returning — on
// every backend.
const (
	leaderSection = "leader"
	nameHandover  = "Resign → next candidate leads"
)

func leaderCases() []*Case {
	var cs []*Case
	for _, be := range patBackends() {
		cs = append(cs, &Case{
			Section: leaderSection, Group: be.name, Name: nameHandover,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				b, done, err := be.open(ctx, e)
				if err != nil {
					return nil, err
				}
				defer done()
				return runHandovers(ctx, p, b)
			},
		})
	}
	return cs
}

// runHandovers alternates the office between two candidates (two
// Elections, so two owners, on one Client: a wrapper to share the backend
// between two Clients would hide its notifications): before each timed
// handover the next candidate is queued behind the leader (seen through
// the backend's Inspector), so the time is the release, the wake-up and
// the grant, never a lease.
func runHandovers(ctx context.Context, p Params, b driver.Backend) (Sample, error) {
	var in driver.Inspector
	ok := driver.As(b, &in)
	if !ok {
		return nil, fmt.Errorf("%w: the backend has no Inspector", errSkip)
	}
	c := lockx.New(b)
	defer c.Close()
	var es [2]*leader.Election
	name := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	for i := range es {
		e, err := leader.New(c, name, leader.WithIdentity(fmt.Sprintf("c%d", i)), leader.WithLease(10*time.Second))
		if err != nil {
			return nil, err
		}
		es[i] = e
	}
	term, err := es[0].Campaign(ctx)
	if err != nil {
		return nil, err
	}
	cur := 0
	var failed error
	s := drive(ctx, p, 1, func(ctx context.Context, _ int, r *recorder) {
		next := make(chan *leader.Term, 1)
		go func() {
			t, _ := es[1-cur].Campaign(ctx)
			next <- t
		}()
		for ctx.Err() == nil {
			if li, err := in.Lock(ctx, es[cur].Key()); err == nil && li.Waiters != 0 {
				break // queued (or the backend cannot count: -1)
			}
			time.Sleep(100 * time.Microsecond)
		}
		start := time.Now()
		if err := term.Resign(context.WithoutCancel(ctx)); err != nil {
			failed = err
		}
		t := <-next
		if t == nil {
			if ctx.Err() == nil {
				r.fail()
			}
			return
		}
		r.ok(time.Since(start))
		term, cur = t, 1-cur
	})
	_ = term.Resign(context.WithoutCancel(ctx))
	if failed != nil && !errors.Is(failed, context.Canceled) {
		return s, failed
	}
	return s, nil
}
