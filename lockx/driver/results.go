package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrNoResult is returned by ResultStore.LoadResult when no unexpired
// outcome is stored under the key.
var ErrNoResult = errors.New("lockx: no stored result")

// Outcome is what a finished idempotent call leaves in a ResultStore.
type Outcome struct {
	// Fingerprint identifies the request the key was first used for; a
	// later call with a different non-empty fingerprint gets ErrKeyReused.
	Fingerprint []byte `json:"fp,omitempty"`
	// Value is the encoded result (Failed false).
	Value []byte `json:"v,omitempty"`
	// Failed marks a terminal error; Err holds its message and Code the
	// text of the registered sentinel it matched ("" if none).
	Failed bool   `json:"f,omitempty"`
	Err    string `json:"e,omitempty"`
	Code   string `json:"c,omitempty"`
	// Created is when the outcome was stored.
	Created time.Time `json:"t"`
}

// MarshalBinary encodes o for stores that keep opaque bytes. The format is
// JSON so that an operator can read a record with redis-cli or psql.
func (o Outcome) MarshalBinary() ([]byte, error) { return json.Marshal(o) }

// UnmarshalBinary decodes what MarshalBinary produced.
func (o *Outcome) UnmarshalBinary(b []byte) error {
	if err := json.Unmarshal(b, o); err != nil {
		return fmt.Errorf("lockx: corrupt stored outcome: %w", err)
	}
	return nil
}

// ResultStore is the capability of keeping the outcomes of idempotent calls
// for a retention period. Backends that can (memlock, redislock, pglock)
// implement it; patterns/idempotency finds it with As on
// Client.Backend(). Keys are the caller's, already scoped (for HTTP: by
// principal); a store adds only its own namespace prefix.
//
// Errors other than ErrNoResult and *ArgError must match ErrUnavailable;
// the pattern then fails closed and runs nothing.
type ResultStore interface {
	// LoadResult returns the outcome stored under key, or ErrNoResult if
	// there is none or it has expired.
	LoadResult(ctx context.Context, key string) (Outcome, error)
	// SaveResult stores o under key for retention unless an unexpired
	// outcome is stored there already, in one atomic step. It returns the
	// outcome stored under key afterwards and whether it is o: false means
	// an earlier outcome won and is returned instead. The first outcome
	// stored for a key therefore stays the only one until it expires.
	SaveResult(ctx context.Context, key string, o Outcome, retention time.Duration) (Outcome, bool, error)
	// DeleteResult forgets key's outcome, so that the next call runs again.
	// Deleting a missing key is not an error.
	DeleteResult(ctx context.Context, key string) error
}

// CheckResultArgs validates a ResultStore key and retention (pass 1 for
// calls without one): key non-empty and at most MaxKeyLen bytes,
// retention positive. Implementations call it first so that every store
// refuses the same input with the same *ArgError.
func CheckResultArgs(key string, retention time.Duration) error {
	switch {
	case key == "":
		return &ArgError{Arg: "key", Reason: "empty"}
	case len(key) > MaxKeyLen:
		return &ArgError{Arg: "key", Reason: fmt.Sprintf("%d bytes, longer than the maximum %d", len(key), MaxKeyLen)}
	case retention <= 0:
		return &ArgError{Arg: "retention", Reason: "must be positive"}
	}
	return nil
}
