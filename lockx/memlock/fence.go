package memlock

import (
	"context"
	"github.com/lockx-go/lockx/lockx/driver"
	"sync"
)

// FenceStore is an in-process driver.FenceStore: the highest token accepted
// per resource, kept in a map for the life of the value. Use it to guard a
// resource that lives in this process (a cache, a file this process owns, an
// HTTP handler's state) against writers holding stale locks from any
// backend. The zero value is ready to use and safe for concurrent use.
type FenceStore struct {
	mu   sync.Mutex
	seen map[string]driver.Token
}

// NewFenceStore returns an empty in-process fence store.
func NewFenceStore() *FenceStore { return &FenceStore{} }

var (
	_ driver.FenceStore = (*FenceStore)(nil)
	_ driver.FenceStore = (*Backend)(nil)
)

// Fence implements driver.FenceStore.
func (s *FenceStore) Fence(ctx context.Context, resource string, token driver.Token) error {
	if err := driver.CheckFenceArgs(resource, token); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seen := s.seen[resource]; token < seen {
		return &driver.StaleTokenError{Resource: resource, Token: token, Seen: seen}
	}
	if s.seen == nil {
		s.seen = make(map[string]driver.Token)
	}
	s.seen[resource] = token
	return nil
}

// Seen returns the highest token accepted for resource, or 0 if none was.
func (s *FenceStore) Seen(resource string) driver.Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[resource]
}

// Fence implements driver.FenceStore on the backend's own fence state, so
// that a single-process program can lock and fence with one value:
//
//	b := memlock.New()
//	locks := lockx.New(b)
//	var store driver.FenceStore = b
//
// The fence state of a Backend lives as long as the Backend does.
func (b *Backend) Fence(ctx context.Context, resource string, token driver.Token) error {
	return b.fenceStore().Fence(ctx, resource, token)
}

// fenceStore returns the Backend's fences state, made on first use.
func (b *Backend) fenceStore() *FenceStore {
	b.sideMu.Lock()
	defer b.sideMu.Unlock()
	if b.fences == nil {
		b.fences = NewFenceStore()
	}
	return b.fences
}
