package driver

import (
	"context"
	"errors"
	"fmt"
)

// A lock alone cannot protect a resource. Its holder can stall — a GC pause,
// a page fault, a network delay of a minute — while its lease runs out, and
// then write as if it still held the lock after another holder took over.
// Checking the lease just before the write does not help: the stall can come
// between the check and the write. (Kleppmann, "How to do distributed
// locking", 2016.)
//
// The remedy is old. Chubby hands every holder a sequencer (lock name and
// generation), and servers reject a request whose sequencer is older than the
// newest they have seen (Burrows, OSDI'06 §2.4); etcd's owner revision plays
// the same role. In lockx every grant carries a Token that is greater than
// every token issued before it for the same key, and a FenceStore is the
// resource's memory of the highest token it has accepted. Only the resource
// can do this check: it is the last line of defence, and the one that turns
// a lock kept for efficiency into one kept for correctness.

// ErrStaleToken reports a write fenced off because a newer holder's token
// has already been accepted for the resource. Every *StaleTokenError matches
// it with errors.Is.
var ErrStaleToken = errors.New("lockx: stale fencing token")

// StaleTokenError is the verdict of a FenceStore on a stale token: Token was
// presented for Resource after Seen, a greater token, had been accepted.
type StaleTokenError struct {
	Resource string
	Token    Token // the token presented
	Seen     Token // the highest token accepted so far
}

// Error implements error.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("lockx: stale fencing token %d for %q: %d already seen", e.Token, truncate(e.Resource, 64), e.Seen)
}

// Is makes errors.Is(err, ErrStaleToken) true for every *StaleTokenError.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// FenceStore is the capability of checking fencing tokens on the resource
// side. Backends that can keep the state (memlock, redislock, pglock)
// implement it; find it on a Client's backend with As:
//
//	var store driver.FenceStore
//	ok := driver.As(client.Backend(), &store)
//
// Fence state is kept per resource, not per lock key, and never expires: a
// resource that forgot its highest token would accept a stale writer again.
// That is affordable because resources are bounded by the user's own data (a
// row, a file, an account), while lock keys may be made up per request and
// come and go. The resource name defaults to the lock key by convention (the
// HTTP middleware uses the Lock-Key header), but it may be any name the
// writers agree on, as long as the tokens presented for it all come from
// locks on one key: tokens of different keys are unrelated.
type FenceStore interface {
	// Fence accepts token for resource if it is greater than or equal to
	// every token accepted for resource so far, and records it, in one
	// atomic step. Equal is accepted so that one holder can write many
	// times. A lower token is refused with a *StaleTokenError (matching
	// ErrStaleToken) and leaves the state unchanged.
	//
	// An empty or oversized resource or an invalid token (zero, above
	// MaxToken) is an *ArgError; a store that cannot be reached returns an
	// error matching ErrUnavailable, and the caller must then not write.
	Fence(ctx context.Context, resource string, token Token) error
}

// CheckFenceArgs validates the arguments of FenceStore.Fence: resource must
// be non-empty and at most MaxKeyLen bytes, token in [1, MaxToken].
// Implementations call it first so that every store refuses the same input
// with the same *ArgError.
func CheckFenceArgs(resource string, token Token) error {
	switch {
	case resource == "":
		return &ArgError{Arg: "resource", Reason: "empty"}
	case len(resource) > MaxKeyLen:
		return &ArgError{Arg: "resource", Reason: fmt.Sprintf("%d bytes, longer than the maximum %d", len(resource), MaxKeyLen)}
	case !token.Valid():
		return &ArgError{Arg: "token", Reason: fmt.Sprintf("%d is not a valid fencing token", token)}
	}
	return nil
}
