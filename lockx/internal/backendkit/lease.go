package backendkit

import "time"

// Lease is a hold's local lease timer: a backend frees (or reports lost) a
// hold whose lease ran out without an Extend, without waiting for the
// server to say so. The timer runs the function given to the first Arm;
// Arm again moves it (an Extend), Stop ends it (a release).
//
// Lease is guarded by the backend's mutex, the one the timer's function
// takes before it looks at the hold: a function that finds the hold gone
// or renewed (Expired reports false) does nothing. The zero value is an
// unarmed Lease.
type Lease struct {
	t *time.Timer
}

// Arm runs fire after d; on a Lease armed before, it moves the timer to d
// from now and keeps the first function (which reads the hold's state when
// it runs, so it needs no new closure).
func (l *Lease) Arm(d time.Duration, fire func()) {
	if l.t == nil {
		l.t = time.AfterFunc(d, fire)
		return
	}
	l.t.Reset(d)
}

// Reset moves an armed timer to d from now; on an unarmed Lease it does
// nothing.
func (l *Lease) Reset(d time.Duration) {
	if l.t != nil {
		l.t.Reset(d)
	}
}

// Stop stops the timer; on an unarmed Lease it does nothing.
func (l *Lease) Stop() {
	if l.t != nil {
		l.t.Stop()
	}
}

// Expired is for the timer's function: it reports whether deadline has
// passed, and if not — the lease was renewed while the timer fired — arms
// the timer again for the rest.
func (l *Lease) Expired(deadline time.Time) bool {
	if d := time.Until(deadline); d > 0 {
		l.Reset(d)
		return false
	}
	return true
}
