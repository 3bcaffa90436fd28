// Package middleware carries lockx's fencing to HTTP services built on
// net/http: the resource side checks fencing tokens before a write runs, the
// client side stamps them on outgoing requests, and a third middleware
// serializes requests per resource with a lock. Echo users find the same
// middleware, sharing this implementation, in package echomw.
//
// # Fencing
//
// A lock can be lost while its holder is stalled, and the stalled holder
// then writes as if it still held it. Fencing wraps the write routes of the
// service that owns a resource and refuses any request whose token is lower
// than one already accepted for that resource:
//
//	store := memlock.NewFenceStore() // or redislock / pglock
//	mux.Handle("PUT /accounts/{id}", middleware.Fencing(store)(putAccount))
//
// Clients send the lock key and its token in the Lock-Key and Fencing-Token
// headers. A stale token gets 409 Conflict (application/problem+json with
// both tokens), a missing one 428 Precondition Required, a malformed one 400.
// Safe methods (GET, HEAD, OPTIONS, TRACE) pass through unchecked.
//
// # Carrying tokens
//
// Transport is an http.RoundTripper that stamps every request made under a
// held lock's context (lockx.ContextWithLock) with those headers, and
// forwards the fence of an incoming checked request, so that services
// calling services carry fencing without code at each call.
//
// # Serializing
//
// Serialize takes a lock per resource (a key derived from the request) for
// the duration of the handler, waits a bounded time for it, answers
// 423 Locked with Retry-After when the resource stays busy, and cancels the
// handler's context if the lock is lost mid-request.
package middleware
