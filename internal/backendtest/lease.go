package backendtest

import "time"

// Lease is the property tests' model of one hold's lease, as the client
// saw it: Start is the time before the grant was asked for, End the time
// after it was answered (or the hold given up), and Lease is 0 for a hold
// renewed by the watchdog (live until released).
type Lease struct {
	Lease      time.Duration
	Start, End time.Time
}

// CertainlyLive reports whether the backend's lease cannot have ended by
// now.
func (l Lease) CertainlyLive(now time.Time) bool {
	return l.Lease == 0 || now.Before(l.Start.Add(l.Lease))
}

// LocallyValid reports whether the client has not yet given the lease up
// as lost (it does so lease·1 % + 2 ms early, for clock drift).
func (l Lease) LocallyValid(now time.Time) bool {
	return l.Lease == 0 || now.Before(l.Start.Add(l.Lease-l.Lease/50-3*time.Millisecond))
}

// PossiblyLive reports whether the backend's lease may still run by now.
func (l Lease) PossiblyLive(now time.Time) bool {
	return l.Lease == 0 || !now.After(l.End.Add(l.Lease+5*time.Millisecond))
}
