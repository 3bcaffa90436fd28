// Package backendkit is the machinery every lockx backend needs beside its
// own protocol: a registry of waiters to wake (Registry), the callbacks of
// a hold's loss (Losses), a hold's local lease deadline (Lease), the
// goroutines a backend starts and must end by Close (Group), and the
// classification of a failed call (Unavailable, Fail, Ended).
//
// It is internal: backends in this repository share it, users never see it.
// None of its types lock for themselves except Group: a Registry, Losses or
// Lease is guarded by the backend's own mutex, because a backend changes
// them together with its lock table and the two must move as one (a release
// frees the key and wakes its waiters under one lock, so no waiter can
// register between the two and miss its wake-up).
package backendkit
