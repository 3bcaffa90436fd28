package memlock

import (
	"context"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// ResultStore is an in-process lockx.ResultStore: the outcomes of
// idempotent calls in a map, each dropped when its retention ends. It is
// for single-process programs and for tests; outcomes die with the process.
// The zero value is ready to use and safe for concurrent use.
type ResultStore struct {
	mu    sync.Mutex
	m     map[string]storedResult
	saves int
	now   func() time.Time // nil: time.Now
}

type storedResult struct {
	o       lockx.Outcome
	expires time.Time
}

// sweepEvery is how many saves pass between scans for expired outcomes, so
// that keys never read again do not pile up.
const sweepEvery = 1024

// NewResultStore returns an empty in-process result store.
func NewResultStore() *ResultStore { return &ResultStore{} }

var (
	_ lockx.ResultStore = (*ResultStore)(nil)
	_ lockx.ResultStore = (*Backend)(nil)
)

func (s *ResultStore) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// LoadResult implements lockx.ResultStore.
func (s *ResultStore) LoadResult(ctx context.Context, key string) (lockx.Outcome, error) {
	if err := lockx.CheckResultArgs(key, 1); err != nil {
		return lockx.Outcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return lockx.Outcome{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[key]
	if !ok {
		return lockx.Outcome{}, lockx.ErrNoResult
	}
	if !s.clock().Before(r.expires) {
		delete(s.m, key)
		return lockx.Outcome{}, lockx.ErrNoResult
	}
	return r.o, nil
}

// SaveResult implements lockx.ResultStore.
func (s *ResultStore) SaveResult(ctx context.Context, key string, o lockx.Outcome, retention time.Duration) (lockx.Outcome, bool, error) {
	if err := lockx.CheckResultArgs(key, retention); err != nil {
		return lockx.Outcome{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return lockx.Outcome{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	if r, ok := s.m[key]; ok && now.Before(r.expires) {
		return r.o, false, nil
	}
	if s.m == nil {
		s.m = make(map[string]storedResult)
	}
	if s.saves++; s.saves%sweepEvery == 0 {
		for k, r := range s.m {
			if !now.Before(r.expires) {
				delete(s.m, k)
			}
		}
	}
	if o.Created.IsZero() {
		o.Created = now
	}
	s.m[key] = storedResult{o: o, expires: now.Add(retention)}
	return o, true, nil
}

// DeleteResult implements lockx.ResultStore.
func (s *ResultStore) DeleteResult(ctx context.Context, key string) error {
	if err := lockx.CheckResultArgs(key, 1); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// Len returns the number of outcomes held, expired ones not yet dropped
// included.
func (s *ResultStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// LoadResult implements lockx.ResultStore on the backend's own result
// state, so that a single-process program gets idempotency from one value:
//
//	b := memlock.New()
//	guard, err := idempotency.New(lockx.New(b)) // finds b's ResultStore
//
// The results of a Backend live as long as the Backend does.
func (b *Backend) LoadResult(ctx context.Context, key string) (lockx.Outcome, error) {
	return b.resultStore().LoadResult(ctx, key)
}

// SaveResult implements lockx.ResultStore; see LoadResult.
func (b *Backend) SaveResult(ctx context.Context, key string, o lockx.Outcome, retention time.Duration) (lockx.Outcome, bool, error) {
	return b.resultStore().SaveResult(ctx, key, o, retention)
}

// DeleteResult implements lockx.ResultStore; see LoadResult.
func (b *Backend) DeleteResult(ctx context.Context, key string) error {
	return b.resultStore().DeleteResult(ctx, key)
}

// resultStore returns the Backend's results state, made on first use.
func (b *Backend) resultStore() *ResultStore {
	b.sideMu.Lock()
	defer b.sideMu.Unlock()
	if b.results == nil {
		b.results = &ResultStore{now: b.now}
	}
	return b.results
}
