package leader

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/lockx-go/lockx/lockx"
)

// Candidate is an instance that stands for election for as long as it
// runs, for code that asks "do I lead now?" rather than being called while
// leading: the gocron Elector (package gocronleader) and the HTTP
// Middleware. Create it with NewCandidate and run Run in a goroutine of
// yours.
type Candidate struct {
	e    *Election
	term atomic.Pointer[Term]
}

// NewCandidate returns a Candidate for e; it leads nothing until Run
// campaigns.
func NewCandidate(e *Election) *Candidate { return &Candidate{e: e} }

// Election returns the candidate's election.
func (c *Candidate) Election() *Election { return c.e }

// Run campaigns until ctx ends, again after each loss, and resigns on the
// way out so that another instance takes over at once. It returns ctx's
// cause, or the election's error (a closed client, say).
func (c *Candidate) Run(ctx context.Context) error {
	if c == nil || c.e == nil {
		return fmt.Errorf("leader: %w", &lockx.ArgError{Arg: "election", Reason: "nil"})
	}
	return c.e.Run(ctx, func(ctx context.Context, t *Term) error {
		c.term.Store(t)
		defer c.term.CompareAndSwap(t, nil)
		<-ctx.Done()
		return nil
	})
}

// Term returns the term this instance leads, if it leads now: a term whose
// lease is still valid by the local clock.
func (c *Candidate) Term() (*Term, bool) {
	t := c.term.Load()
	if t == nil || t.Context().Err() != nil {
		return nil, false
	}
	return t, true
}
