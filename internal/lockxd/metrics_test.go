package lockxd

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lockx-go/lockx/lockx/memlock"
)

// The attack: anyone who reaches the API port reads /metrics, which names
// every tenant and its activity. It needs an API key, and a tenant's key
// shows only that tenant's series.
func TestMetricsNeedKey(t *testing.T) {
	ts := start(t, memlock.New())
	call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"m","lease_ms":30000}`)
	call(t, ts, "key-b", "POST", "/v1/locks/try-acquire", `{"key":"m","lease_ms":30000}`)
	if r := call(t, ts, "", "GET", "/metrics", ""); r.status != 401 || strings.Contains(r.raw, `tenant="a"`) {
		t.Errorf("/metrics without a key: %d\n%s", r.status, r.raw)
	}
	r := call(t, ts, "key-b", "GET", "/metrics", "")
	if r.status != 200 || !strings.Contains(r.raw, `lockxd_held{tenant="b"} 1`) {
		t.Fatalf("/metrics with b's key: %d\n%s", r.status, r.raw)
	}
	if strings.Contains(r.raw, `tenant="a"`) || strings.Contains(r.raw, `tenant="q"`) {
		t.Errorf("/metrics with b's key names other tenants:\n%s", r.raw)
	}
	// The operator's page, for a listener of its own, shows every tenant.
	srv := NewServer(memlock.New(), Config{Tenants: tenants()})
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/locks/try-acquire", strings.NewReader(`{"key":"m","lease_ms":30000}`)))
	rec = httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `lockxd_held{tenant="a"} 0`) || !strings.Contains(rec.Body.String(), `lockxd_held{tenant="b"} 0`) {
		t.Errorf("MetricsHandler: %d\n%s", rec.Code, rec.Body)
	}
}
