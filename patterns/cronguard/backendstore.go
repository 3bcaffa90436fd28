package cronguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockx-go/lockx/internal/wallclock"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// BackendStore is a Store kept in a lockx backend's ResultStore capability
// (memlock, redislock, pglock), so that every instance of a fleet reads
// every instance's records — what AtLeastOnce needs to tell a done trigger
// from an abandoned one. Records expire after the store's retention.
//
// A record is one entry per trigger, written once: the first successful or
// failed run of a trigger is its record, and a run whose claim was lost is
// kept beside it under a key of its own. LastRuns reads the entries of the
// job's recent triggers, walking its schedule back from now, so it costs a
// round trip per trigger looked at.
type BackendStore struct {
	rs        driver.ResultStore
	retention time.Duration

	mu    sync.Mutex
	sched map[string]Schedule // by job, registered by the job's Claimer
}

// NewBackendStore returns a Store over rs that keeps records for retention.
// Find it on a client's backend:
//
//	var rs driver.ResultStore
//	ok := driver.As(locks.Backend(), &rs)
//
// A nil rs or a non-positive retention is an *lockx.ArgError.
func NewBackendStore(rs driver.ResultStore, retention time.Duration) (*BackendStore, error) {
	switch {
	case rs == nil:
		return nil, &lockx.ArgError{Arg: "result store", Reason: "nil"}
	case retention <= 0:
		return nil, &lockx.ArgError{Arg: "retention", Reason: "must be positive"}
	}
	return &BackendStore{rs: rs, retention: retention, sched: make(map[string]Schedule)}, nil
}

var _ Store = (*BackendStore)(nil)

// register tells the store job's schedule, for LastRuns.
func (s *BackendStore) register(job string, sched Schedule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sched[job] = sched
}

// recordKey names the entry of a trigger: "cronrun:" for a run that kept its
// claim, "cronlost:" for one that lost it.
func recordKey(kind, job string, trigger time.Time) string {
	return kind + job + ":" + trigger.UTC().Format(time.RFC3339Nano)
}

const (
	doneKind  = "cronrun:"
	lostKind  = "cronlost:"
	startKind = "cronstart:"
)

// begin marks trigger as started by r's runner for ttl, unless a start is
// marked already: a durable claim beside the lock, for backends whose locks
// do not outlive their holder's process (pglock's session advisory locks)
// or may be lost in a failover (Redis). It reports whether r's mark won.
func (s *BackendStore) begin(ctx context.Context, r Run, ttl time.Duration) (bool, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("cronguard: encode record: %w", err)
	}
	_, won, err := s.rs.SaveResult(ctx, recordKey(startKind, r.Job, r.Trigger), driver.Outcome{Value: b, Created: time.Now()}, ttl)
	return won, err
}

// Record implements Store.
func (s *BackendStore) Record(ctx context.Context, r Run) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("cronguard: encode record: %w", err)
	}
	kind := doneKind
	if r.Lost {
		kind = lostKind
	}
	o := driver.Outcome{Value: b, Failed: r.Error != "", Err: r.Error, Created: time.Now()}
	_, _, err = s.rs.SaveResult(ctx, recordKey(kind, r.Job, r.Trigger), o, s.retention)
	return err
}

func (s *BackendStore) load(ctx context.Context, kind, job string, trigger time.Time) (Run, bool, error) {
	o, err := s.rs.LoadResult(ctx, recordKey(kind, job, trigger))
	if errors.Is(err, driver.ErrNoResult) {
		return Run{}, false, nil
	}
	if err != nil {
		return Run{}, false, err
	}
	var r Run
	if err := json.Unmarshal(o.Value, &r); err != nil {
		return Run{}, false, fmt.Errorf("cronguard: corrupt record: %w", err)
	}
	return r, true, nil
}

// Find implements Store.
func (s *BackendStore) Find(ctx context.Context, job string, trigger time.Time) (Run, bool, error) {
	return s.load(ctx, doneKind, job, trigger)
}

// LastRuns implements Store. It looks at the job's last 4n+16 triggers
// (within the retention) and returns up to n records, newest first: a
// trigger's run, or its lost run if it has no other. A job whose Claimer
// was not built over this store has no known schedule: an error.
func (s *BackendStore) LastRuns(ctx context.Context, job string, n int) ([]Run, error) {
	s.mu.Lock()
	sched := s.sched[job]
	s.mu.Unlock()
	if sched == nil {
		return nil, fmt.Errorf("cronguard: no schedule known for job %q in this store", job)
	}
	if n <= 0 {
		n = DefaultKeep
	}
	now := wallclock.Now()
	var out []Run
	for _, trig := range recentTriggers(sched, now, 4*n+16, now.Add(-s.retention)) {
		r, ok, err := s.load(ctx, doneKind, job, trig)
		if err == nil && !ok {
			r, ok, err = s.load(ctx, lostKind, job, trig)
		}
		if err != nil {
			return out, err
		}
		if ok {
			if out = append(out, r); len(out) == n {
				break
			}
		}
	}
	return out, nil
}

// recentTriggers returns up to max triggers of s not after one period past
// now (a clock ahead may have run the next one) and not before oldest,
// newest first.
func recentTriggers(s Schedule, now time.Time, max int, oldest time.Time) []time.Time {
	per := period(s)
	if per <= 0 {
		return nil
	}
	end := now.Add(per)
	span := time.Duration(max) * per
	for {
		from := end.Add(-span)
		if from.Before(oldest) {
			from = oldest
		}
		var ts []time.Time
		for t := s.Next(from.Add(-1)); !t.IsZero() && !t.After(end); t = s.Next(t) {
			ts = append(ts, t)
			if len(ts) > 4*max { // dense stretch: keep the newest
				ts = ts[len(ts)-max:]
			}
		}
		if len(ts) >= max || !from.After(oldest) || span > 1<<20*per {
			slices.Reverse(ts)
			return ts[:min(max, len(ts))]
		}
		span *= 4 // irregular gaps: look further back
	}
}
