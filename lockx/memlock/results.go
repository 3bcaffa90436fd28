package memlock

import (
	"context"
	"github.com/lockx-go/lockx/lockx/driver"
	"sync"
	"time"
)

// ResultStore is an in-process driver.ResultStore: the outcomes of
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
	o       driver.Outcome
	expires time.Time
}

// sweepEvery is how many saves pass between scans for expired outcomes, so
// that keys never read again do not pile up.
const sweepEvery = 1024

// NewResultStore returns an empty in-process result store.
func NewResultStore() *ResultStore { return &ResultStore{} }

var (
	_ driver.ResultStore = (*ResultStore)(nil)
	_ driver.ResultStore = (*Backend)(nil)
)

func (s *ResultStore) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// LoadResult implements driver.ResultStore.
func (s *ResultStore) LoadResult(ctx context.Context, key string) (driver.Outcome, error) {
	if err := driver.CheckResultArgs(key, 1); err != nil {
		return driver.Outcome{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.Outcome{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[key]
	if !ok {
		return driver.Outcome{}, driver.ErrNoResult
	}
	if !s.clock().Before(r.expires) {
		delete(s.m, key)
		return driver.Outcome{}, driver.ErrNoResult
	}
	return r.o, nil
}

// SaveResult implements driver.ResultStore.
func (s *ResultStore) SaveResult(ctx context.Context, key string, o driver.Outcome, retention time.Duration) (driver.Outcome, bool, error) {
	if err := driver.CheckResultArgs(key, retention); err != nil {
		return driver.Outcome{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return driver.Outcome{}, false, err
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

// DeleteResult implements driver.ResultStore.
func (s *ResultStore) DeleteResult(ctx context.Context, key string) error {
	if err := driver.CheckResultArgs(key, 1); err != nil {
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

// LoadResult implements driver.ResultStore on the backend's own result
// state, so that a single-process program gets idempotency from one value:
//
//	b := memlock.New()
//	guard, err := idempotency.New(lockx.New(b)) // finds b's ResultStore
//
// The results of a Backend live as long as the Backend does.
func (b *Backend) LoadResult(ctx context.Context, key string) (driver.Outcome, error) {
	return b.resultStore().LoadResult(ctx, key)
}

// SaveResult implements driver.ResultStore; see LoadResult.
func (b *Backend) SaveResult(ctx context.Context, key string, o driver.Outcome, retention time.Duration) (driver.Outcome, bool, error) {
	return b.resultStore().SaveResult(ctx, key, o, retention)
}

// DeleteResult implements driver.ResultStore; see LoadResult.
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
