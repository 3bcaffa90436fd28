package shop

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// snakeKey is the form of every JSON name the service sends.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// checkSnake fails for a JSON name that is not snake_case, anywhere in v.
func checkSnake(t *testing.T, where string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if !snakeKey.MatchString(k) {
				t.Errorf("%s: JSON name %q is not snake_case", where, k)
			}
			checkSnake(t, where+"."+k, x)
		}
	case []any:
		for _, x := range v {
			checkSnake(t, where+"[]", x)
		}
	}
}

type apiAnswer struct {
	code int
	hdr  http.Header
	raw  []byte
	body map[string]any
}

func apiCall(t *testing.T, method, url string, hdr map[string]string, body string) apiAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := apiAnswer{code: resp.StatusCode, hdr: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// TestAPIAnswers pins the service's JSON: every error answer is an RFC 9457
// problem (application/problem+json, with its status and a title), every
// JSON name is snake_case — the nested stock object of an order included —
// durations are in milliseconds, and an order that was never reserved has
// no zero deadline.
func TestAPIAnswers(t *testing.T) {
	b, err := Open(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	one := []Product{{SKU: "phone", Name: "Flash-sale phone", Price: 9900, Stock: 2}}
	svcs, urls, err := StartReplicas(context.Background(), b, Config{Sale: "api-" + randomHex(4), Products: one, AdminLease: time.Minute}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer StopReplicas(svcs)
	url := urls[0]
	key := func() map[string]string { return map[string]string{"Idempotency-Key": randomHex(16)} }

	// A purchase: snake_case throughout, no zero deadline.
	a := apiCall(t, "POST", url+"/orders", key(), `{"sku":"phone","user":"alice"}`)
	if a.code != http.StatusCreated {
		t.Fatalf("buy: %d %s", a.code, a.raw)
	}
	checkSnake(t, "order", a.body)
	if st, ok := a.body["stock"].(map[string]any); !ok || st["parts"] == nil {
		t.Errorf("order's stock object: %s", a.raw)
	}
	if bytes.Contains(a.raw, []byte("0001-01-01")) {
		t.Errorf("order carries a zero time: %s", a.raw)
	}
	// A reservation has a deadline, in the order and in its stock object.
	a = apiCall(t, "POST", url+"/orders", key(), `{"sku":"phone","user":"bob","hold_ms":60000}`)
	if st, _ := a.body["stock"].(map[string]any); a.code != http.StatusCreated || a.body["deadline"] == nil || st["deadline"] == nil {
		t.Errorf("reserve: %d %s", a.code, a.raw)
	}

	// An admin lease is held (not released): the stats show it, in ms.
	lease := apiCall(t, "POST", url+"/admin/lease?sku=phone", nil, "")
	if lease.code != http.StatusOK || lease.body["lease_ms"] != float64(time.Minute.Milliseconds()) {
		t.Fatalf("lease: %d %s", lease.code, lease.raw)
	}
	stats := apiCall(t, "GET", url+"/api/stats", nil, "")
	checkSnake(t, "stats", stats.body)
	locks, _ := stats.body["locks"].([]any)
	found := false
	for _, l := range locks {
		l := l.(map[string]any)
		if l["key"] == lease.body["lock_key"] {
			ttl, _ := l["ttl_ms"].(float64)
			found = ttl > 0 && ttl <= float64(time.Minute.Milliseconds())
		}
	}
	if !found {
		t.Errorf("stats: the admin lease with a ttl_ms within a minute is missing: %s", stats.raw)
	}
	products := apiCall(t, "GET", url+"/api/products", nil, "")
	if products.code != http.StatusOK || !bytes.Contains(products.raw, []byte(`"initial_stock"`)) {
		t.Errorf("products: %d %s", products.code, products.raw)
	}

	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		body               string
		code               int
		detail             string // in the problem's detail, if not ""
	}{
		{"no key", "POST", "/orders", nil, `{"sku":"phone","user":"carol"}`, http.StatusBadRequest, ""},
		{"short key", "POST", "/orders", map[string]string{"Idempotency-Key": "ab"}, `{"sku":"phone","user":"carol"}`, http.StatusBadRequest, "shorter than 8"},
		{"bad body", "POST", "/orders", key(), `{"sku":`, http.StatusBadRequest, ""},
		{"unknown sku", "POST", "/orders", key(), `{"sku":"tv","user":"carol"}`, http.StatusBadRequest, ""},
		{"one per buyer", "POST", "/orders", key(), `{"sku":"phone","user":"alice"}`, http.StatusForbidden, ""},
		{"sold out", "POST", "/orders", key(), `{"sku":"phone","user":"dave"}`, http.StatusGone, ""},
		{"no such order", "GET", "/orders/nope", nil, "", http.StatusNotFound, ""},
		{"no such route", "GET", "/nope", nil, "", http.StatusNotFound, ""},
		{"wrong method", "DELETE", "/orders", nil, "", http.StatusMethodNotAllowed, ""},
		{"unfenced restock", "POST", "/admin/products/phone/restock?n=5", nil, "", http.StatusPreconditionRequired, ""},
		{"bad restock count", "POST", "/admin/products/phone/restock?n=lots",
			map[string]string{"Lock-Key": lease.body["lock_key"].(string), "Fencing-Token": jsonNumber(lease.body["fencing_token"])}, "", http.StatusBadRequest, ""},
		{"unknown lease sku", "POST", "/admin/lease?sku=tv", nil, "", http.StatusBadRequest, ""},
	} {
		a := apiCall(t, tc.method, url+tc.path, tc.hdr, tc.body)
		if a.code != tc.code {
			t.Errorf("%s: %d, want %d: %s", tc.name, a.code, tc.code, a.raw)
			continue
		}
		if ct := a.hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
			t.Errorf("%s: Content-Type %q, want application/problem+json: %s", tc.name, ct, a.raw)
		}
		if a.body["status"] != float64(tc.code) || a.body["title"] == nil || a.body["title"] == "" || a.body["type"] == nil {
			t.Errorf("%s: not a problem with status %d, a title and a type: %s", tc.name, tc.code, a.raw)
		}
		checkSnake(t, tc.name, a.body)
		if d, _ := a.body["detail"].(string); !strings.Contains(d, tc.detail) {
			t.Errorf("%s: detail %q, want it to say %q", tc.name, d, tc.detail)
		}
	}
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestLoadgenProgress checks the two forms of the progress: a bar redrawn
// in place for a terminal, plain lines for a file or a pipe.
func TestLoadgenProgress(t *testing.T) {
	lr := &loadRun{cfg: LoadConfig{Buyers: 100}}
	lr.done.Store(50)
	start := time.Now().Add(-time.Second)
	if live := lr.progressLine(start, true); !strings.HasPrefix(live, "\r[###############...............] 50/100 buyers") || strings.Contains(live, "\n") {
		t.Errorf("terminal form: %q", live)
	}
	if plain := lr.progressLine(start, false); !strings.HasPrefix(plain, "loadgen: 50/100 buyers") || strings.Contains(plain, "\r") || !strings.HasSuffix(plain, "\n") {
		t.Errorf("plain form: %q", plain)
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer taken for a terminal")
	}
}
