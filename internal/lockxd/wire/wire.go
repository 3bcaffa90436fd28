// Package wire holds the JSON documents of lockxd's HTTP API, shared by
// the server (internal/lockxd) and its Go client (lockx/httplock), so the
// two cannot drift apart. docs/openapi/lockxd.yaml describes them.
package wire

// HoldRequest is the body of the hold endpoints (acquire, try-acquire,
// extend, release, ttl of locks, rwlocks and semaphores). The server
// rejects fields an endpoint does not use.
type HoldRequest struct {
	Key     string `json:"key"`
	Owner   string `json:"owner,omitempty"`
	LeaseMS int64  `json:"lease_ms,omitempty"`
	WaitMS  int64  `json:"wait_ms,omitempty"`
	Fair    bool   `json:"fair,omitempty"`
	// Queue (try-acquire) registers a refused owner as a waiter — in a fair
	// queue, its place — for a client that waits on GET /v1/watch and
	// retries. It keeps the place for QueueTTLMS unless it retries; a
	// release by the owner withdraws it.
	Queue      bool  `json:"queue,omitempty"`
	QueueTTLMS int64 `json:"queue_ttl_ms,omitempty"`
	// Renewed says the client will keep the hold alive with extend at a
	// third of the granted lease, so a direct fair handoff may grant a
	// shorter first lease (LeaseMS of the grant says which).
	Renewed bool   `json:"renewed,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Limit   int64  `json:"limit,omitempty"`
	Count   int64  `json:"count,omitempty"`
}

// Grant is the answer of a hold endpoint: a grant, extension, release or
// TTL. Owner is the hold's secret, sent only to its acquirer (and echoed
// to whoever presents it); Holder is its public label, as inspection
// shows it.
type Grant struct {
	Key    string `json:"key"`
	Owner  string `json:"owner"`
	Holder string `json:"holder,omitempty"`
	// Signature is the server's signature of Token for Key, when the
	// server signs tokens (lockx.TokenSigner with the tenant's key).
	Signature string `json:"signature,omitempty"`
	Token     string `json:"token,omitempty"` // fencing token, decimal (fits uint64)
	LeaseMS   int64  `json:"lease_ms,omitempty"`
	TTLMS     int64  `json:"ttl_ms,omitempty"`
	Mode      string `json:"mode,omitempty"`
	Count     int64  `json:"count,omitempty"`
}

// ProblemType is the prefix of every problem type URI; the rest is the
// problem's code (e.g. "not-held").
const ProblemType = "urn:lockxd:problem:"

// Problem is an RFC 9457 problem document. Code repeats the last element
// of Type for clients that switch on it; TTLMS and Seen are extension
// members of refused acquisitions and stale fencing tokens.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	TTLMS  int64  `json:"ttl_ms,omitempty"`
	Seen   string `json:"seen,omitempty"`
}

// MaxBatch is the most renewals one extend-many request may carry.
const MaxBatch = 1024

// Batch is the body of extend-many: the renewals of one client's due
// locks, answered in one round trip.
type Batch struct {
	Locks []BatchItem `json:"locks"`
}

// BatchItem is one renewal of a Batch.
type BatchItem struct {
	Key     string `json:"key"`
	Owner   string `json:"owner"`
	LeaseMS int64  `json:"lease_ms"`
}

// BatchResults is the answer to a Batch, one result per item, in order.
type BatchResults struct {
	Results []BatchResult `json:"results"`
}

// BatchResult is one renewal's outcome: status 200, 404 (not held) or a
// problem's status and code.
type BatchResult struct {
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Fence is the body of POST /v1/fence, and its answer.
type Fence struct {
	Resource string `json:"resource"`
	Token    string `json:"token"`
	// Signature is the token's signature from its grant; a server that
	// signs tokens requires it.
	Signature string `json:"signature,omitempty"`
}

// LockView is the inspector's view of one lock, with the tenant's
// namespace stripped. Holder is the hold's public label, never its secret:
// presenting it as an owner operates nothing.
type LockView struct {
	Key     string `json:"key"`
	Holder  string `json:"holder"`
	Token   string `json:"token"`
	TTLMS   int64  `json:"ttl_ms"`
	AgeMS   int64  `json:"age_ms"`
	Waiters int    `json:"waiters"`
}

// LockList is the answer of GET /v1/locks?prefix=….
type LockList struct {
	Locks     []LockView `json:"locks"`
	Truncated bool       `json:"truncated"`
}

// Usage is the answer of GET /v1/semaphores/usage.
type Usage struct {
	InUse   int64 `json:"in_use"`
	Holders int64 `json:"holders"`
	Waiting int64 `json:"waiting"`
}

// WatchCancel is the body of POST /v1/watch/cancel: the id of a watch
// stream, from its ready event's data.
type WatchCancel struct {
	ID string `json:"id"`
}

// Many is the body of POST /v1/locks/acquire-many: one all-or-nothing
// attempt at a set of keys for one owner (driver.ManyAcquirer). Keys come
// sorted, without duplicates.
type Many struct {
	Owner   string   `json:"owner"`
	LeaseMS int64    `json:"lease_ms"`
	Keys    []string `json:"keys"`
}

// ManyResults is the answer to Many, one Grant per key, in order: a
// granted key has a Token; a refused one none, and TTLMS is its holder's
// remaining lease when known. Either every key has a token or none is held.
type ManyResults struct {
	Results []Grant `json:"results"`
}
