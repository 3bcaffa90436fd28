package driver

import (
	"context"
	"fmt"
)

// ManyAcquirer is an optional capability: a backend that can attempt a whole
// set of keys in one round trip (a pipeline, a multi-row statement)
// implements it, and AcquireMany uses it for its first attempt.
//
// AcquireMany tries every request once, all or nothing: either every key is
// granted to its request's owner (each Result Acquired, with the key's own
// fencing token and lease, as Backend.Acquire would return it) or none is
// held by the owners afterwards — a backend that granted some keys before
// finding one refused releases them before it returns. Results are in the
// order of reqs; a refused set reports Acquired false on at least one
// result, with the holder's remaining lease in TTL when known. Requests come
// sorted by key, without duplicates, all with one owner, and with Wait and
// Fair false: waiting, fairness and retries stay with the Client, which
// falls back to taking the keys one by one in sorted order when the set is
// refused. An error means the outcome is unknown (it must match
// ErrUnavailable); the Client then releases every key of the set,
// owner-checked, before it goes on.
//
// The Client uses the capability only for sets taken under a fresh owner
// (no owner in the context, so no member can be a reentrant hold) without
// Fair or LocalFirst; everything else goes key by key.
type ManyAcquirer interface {
	AcquireMany(ctx context.Context, reqs []Request) ([]Result, error)
}

// ManyReleaser is an optional capability: a backend that can release
// several keys of one owner in one round trip (per node) implements it, and
// LockSet.Release gives the set back through it.
type ManyReleaser interface {
	// ReleaseMany releases each key from owner, as Backend.Release would,
	// and returns one error per key, in order: nil, ErrNotHeld, or an error
	// matching ErrUnavailable when the outcome is unknown (the Client then
	// retries that key alone with Release).
	ReleaseMany(ctx context.Context, keys []string, owner Owner) []error
}

// CheckManyRequests checks what ManyAcquirer.AcquireMany may assume of its
// requests — one owner, no waiting, no fairness — so that every backend
// refuses other input with the same *ArgError.
func CheckManyRequests(reqs []Request) error {
	for i, r := range reqs {
		if r.Owner != reqs[0].Owner {
			return &ArgError{Arg: "requests", Reason: fmt.Sprintf("owner of %q differs from the first request's", r.Key)}
		}
		if r.Fair || r.Wait {
			return &ArgError{Arg: "requests", Reason: fmt.Sprintf("request %d waits or is fair; AcquireMany makes one plain attempt", i)}
		}
	}
	return nil
}
