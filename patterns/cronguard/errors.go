package cronguard

import (
	"errors"
	"fmt"
	"time"
)

// ErrSkipped is matched (errors.Is) by every *SkipError: the trigger was
// not run by this instance.
var ErrSkipped = errors.New("cronguard: trigger skipped")

// ErrAtMostFor is the cause of a run's context cancelled because the run
// reached AtMostFor, the ceiling of its claim.
var ErrAtMostFor = errors.New("cronguard: run reached AtMostFor")

// SkipReason says why an instance did not run a trigger.
type SkipReason int

// Skip reasons.
const (
	// Taken: another instance holds the trigger's claim: it runs the
	// trigger or has run it. The normal outcome on all but one instance.
	Taken SkipReason = iota + 1
	// Done: under AtLeastOnce, the outcome store already records the
	// trigger as done.
	Done
	// Overlap: a previous run of the job is still running (or its runner
	// died less than AtMostFor ago), and AllowOverlap is not set.
	Overlap
	// Unavailable: the backend, its clock or the outcome store could not be
	// asked. The trigger may not run anywhere: this is the skip to alert on.
	Unavailable
)

// String returns the reason's name.
func (r SkipReason) String() string {
	switch r {
	case Taken:
		return "taken"
	case Done:
		return "done"
	case Overlap:
		return "overlap"
	case Unavailable:
		return "unavailable"
	}
	return fmt.Sprintf("SkipReason(%d)", int(r))
}

// SkipError reports a trigger this instance did not run. It is what RunAt
// and Claim return and what the OnSkip hook receives.
type SkipError struct {
	Job      string
	Trigger  time.Time
	Instance string
	Reason   SkipReason
	Err      error // the cause for Unavailable, else nil
}

// Error implements error.
func (e *SkipError) Error() string {
	msg := fmt.Sprintf("cronguard: %s at %s skipped on %s: %s", e.Job,
		e.Trigger.UTC().Format(time.RFC3339Nano), e.Instance, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrSkipped) true for every *SkipError.
func (e *SkipError) Is(target error) bool { return target == ErrSkipped }

// Unwrap returns the cause.
func (e *SkipError) Unwrap() error { return e.Err }
