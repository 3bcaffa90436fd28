// Package lockxd is the lock service behind cmd/lockxd: an http.Handler
// that serves one lockx backend to clients in any language over HTTP/JSON,
// with API keys bound to tenants, per-tenant namespaces, quotas and rate
// limits, per-tenant metrics, a health endpoint, server-sent-event wake-ups
// and an OpenAPI document. lockx/httplock is its Go client.
//
// It lives in an internal package so that the binary, the client's
// conformance tests and the benchmarks can all start the very same server
// in-process; users run the binary (docs/lockxd.md).
package lockxd
