// Package httplock is the Go client of lockxd, the lock service
// (cmd/lockxd): a driver.Backend whose store is a lockxd server, so a Go
// service takes locks through the service exactly as it would take them
// from Redis or PostgreSQL directly — same Client, same watchdog, same
// reentrancy, fencing tokens, fair waiting, read/write locks and
// semaphores — without holding the backend's credentials.
//
//	locks := lockx.New(httplock.New("http://lockxd:7420", os.Getenv("LOCKXD_KEY")))
//	defer locks.Close()
//
//	err := locks.Do(ctx, "orders/42", func(ctx context.Context) error {
//		return ship(ctx, 42) // ctx ends if the lock is lost
//	})
//
// Every call is one HTTP request: an attempt is POST try-acquire, the
// watchdog's renewals of all due locks go out in one POST extend-many, a
// release is POST release. Waiting is the Client's, as with any backend: a
// refused attempt registers the owner as a waiter on the server, the
// Client opens a server-sent-event stream (GET /v1/watch) that the server
// confirms once the backend is watching, attempts again, and sleeps until
// the stream says "wake" — a release, not a poll. The long-poll acquire
// endpoint is for clients without such a loop (curl, scripts).
//
// Errors keep their lockx meaning: a refusal is ErrNotAcquired, a release
// or extension by a non-holder ErrNotHeld, bad input an *driver.ArgError.
// Everything else the server answers — 401, a 429 quota or rate limit, a
// 501 missing capability, a 503 unreachable backend — and every transport
// error match driver.ErrUnavailable, with the server's answer as an *Error.
//
// Keys live in the API key's tenant namespace on the server: two tenants
// can use the same key names without meeting.
package httplock
