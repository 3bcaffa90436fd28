package cronguard

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// Run is the outcome record of one run of a trigger: who ran it, when, for
// how long and with what result.
type Run struct {
	Job      string
	Trigger  time.Time   // the scheduled instant the run served
	Instance string      // the runner's instance name (WithInstance)
	Token    lockx.Token // the fencing token of the trigger's claim
	Started  time.Time   // by the runner's clock
	Duration time.Duration
	Error    string // empty on success
	// Lost reports that the run's claim was lost before it ended (lease
	// ceiling passed, renewal failed): the run does not count as done, and
	// under AtLeastOnce the trigger may run again.
	Lost bool
}

// Succeeded reports whether the run finished without error and kept its claim.
func (r Run) Succeeded() bool { return r.Error == "" && !r.Lost }

// Store keeps outcome records. Share one store between the instances of a
// fleet (a Redis or SQL implementation) to see every instance's runs from
// anywhere; under AtLeastOnce the shared store is also how an instance
// learns that a trigger is done. Implementations must be safe for
// concurrent use and return errors matching lockx.ErrUnavailable when the
// store cannot be reached.
type Store interface {
	// Record saves r. A trigger may have several records (a run whose claim
	// was lost, then its re-run).
	Record(ctx context.Context, r Run) error
	// Find returns a record of job's trigger that is not Lost, if any.
	Find(ctx context.Context, job string, trigger time.Time) (Run, bool, error)
	// LastRuns returns up to n of job's most recent records, newest first.
	LastRuns(ctx context.Context, job string, n int) ([]Run, error)
}

// DefaultKeep is the number of records per job a MemStore keeps by default.
const DefaultKeep = 256

// MemStore is an in-process Store keeping the last records of each job. It
// serves a single process, the instances of a test, or as the default of a
// guard without WithStore (each guard then sees only its own runs).
type MemStore struct {
	mu   sync.Mutex
	keep int
	runs map[string][]Run // per job, oldest first
}

// NewMemStore returns a MemStore that keeps the last keep records of each
// job (DefaultKeep if keep <= 0).
func NewMemStore(keep int) *MemStore {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &MemStore{keep: keep, runs: make(map[string][]Run)}
}

var _ Store = (*MemStore)(nil)

// Record implements Store.
func (s *MemStore) Record(ctx context.Context, r Run) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.Job == "" {
		return errors.New("cronguard: record without job name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := append(s.runs[r.Job], r)
	if len(l) > s.keep {
		l = append(l[:0:0], l[len(l)-s.keep:]...)
	}
	s.runs[r.Job] = l
	return nil
}

// Find implements Store.
func (s *MemStore) Find(ctx context.Context, job string, trigger time.Time) (Run, bool, error) {
	if err := ctx.Err(); err != nil {
		return Run{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.runs[job]
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].Trigger.Equal(trigger) && !l[i].Lost {
			return l[i], true, nil
		}
	}
	return Run{}, false, nil
}

// LastRuns implements Store.
func (s *MemStore) LastRuns(ctx context.Context, job string, n int) ([]Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.runs[job]
	if n <= 0 || n > len(l) {
		n = len(l)
	}
	out := make([]Run, n)
	for i := range out {
		out[i] = l[len(l)-1-i]
	}
	return out, nil
}
