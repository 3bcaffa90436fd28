// Package gocronleader makes a leader election a go-co-op/gocron v2
// Elector, so that of several schedulers running the same jobs only the
// leader's runs them:
//
//	e, _ := leader.New(locks, "billing-jobs")
//	el := gocronleader.New(e)
//	go el.Run(ctx) // campaigns until ctx ends
//	s, _ := gocron.NewScheduler(gocron.WithDistributedElector(el))
//
// gocron asks IsLeader before each run and skips the run on an error. Here
// IsLeader answers from the term this instance holds, and checks the
// term's lease on the spot, so an instance that was paused or cut off
// stops running jobs without asking the backend. A running job is not
// stopped by gocron when leadership moves: a job that writes should take
// the term from Term and fence its writes with it, or watch its context.
package gocronleader

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockx-go/lockx/patterns/leader"
)

// ErrNotLeader is IsLeader's answer on an instance that does not lead.
var ErrNotLeader = errors.New("gocronleader: not the leader")

// Elector is a gocron.Elector over a leader.Candidate. Create it with New
// and run Run in a goroutine of yours.
type Elector struct {
	c *leader.Candidate
}

var _ gocron.Elector = (*Elector)(nil)

// New returns an Elector for e. It leads nothing until Run campaigns.
func New(e *leader.Election) *Elector { return &Elector{c: leader.NewCandidate(e)} }

// Run campaigns for the election until ctx ends, campaigning again after
// each loss, and resigns on the way out so that another scheduler takes
// over at once (leader.Candidate.Run).
func (el *Elector) Run(ctx context.Context) error { return el.c.Run(ctx) }

// IsLeader implements gocron.Elector: nil while this instance holds a term
// whose lease is still valid, else an error matching ErrNotLeader.
func (el *Elector) IsLeader(context.Context) error {
	if _, ok := el.c.Term(); !ok {
		return fmt.Errorf("%w of %q", ErrNotLeader, el.c.Election().Name())
	}
	return nil
}

// Term returns the term this instance leads, if it leads: a job fences its
// writes with Term().Token().
func (el *Elector) Term() (*leader.Term, bool) { return el.c.Term() }
