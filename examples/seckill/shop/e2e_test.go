package shop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// sale starts replicas on b, runs the load generator and checks the
// report's invariants.
func sale(t *testing.T, b *Backends, replicas int, lc LoadConfig) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Config{Sale: "test-" + randomHex(4), Products: DefaultProducts(300), CronEvery: 500 * time.Millisecond, AdminLease: 300 * time.Millisecond}
	svcs, urls, err := StartReplicas(ctx, b, cfg, replicas)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := StopReplicas(svcs); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	lc.Targets = urls
	r, err := RunLoad(ctx, lc)
	var out bytes.Buffer
	r.Print(&out)
	t.Logf("\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); err != nil {
		t.Fatalf("invariants: %v", err)
	}
	if r.Replicas != replicas || r.Sold == 0 || r.Replayed == 0 {
		t.Fatalf("sale did not happen as planned: %+v", r)
	}
	if lc.Restock > 0 && (!r.StaleAdminSeen || r.StaleRejected != 1 || r.Restocks != 1) {
		t.Fatalf("fencing: stale admin refused %v, rejected %d, restocks %d; want true, 1, 1", r.StaleAdminSeen, r.StaleRejected, r.Restocks)
	}
	return r
}

func loadConfig() LoadConfig {
	return LoadConfig{SKU: "phone", Buyers: 600, Concurrency: 32, LostReply: 0.3, Abandon: 0.03, Hold: 400 * time.Millisecond, Restock: 25}
}

func TestSaleEmbedded(t *testing.T) {
	b, err := Open(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sale(t, b, 3, loadConfig())
}

func TestSaleRedisAndPostgres(t *testing.T) {
	redisURL := "redis://" + testenv.RedisAddr(t) + "/0"
	pgURL := testenv.PostgresURL(t)
	b, err := Open(context.Background(), redisURL, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sale(t, b, 3, loadConfig())
}

func TestSalePostgresOnly(t *testing.T) {
	b, err := Open(context.Background(), "", testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lc := loadConfig()
	lc.Buyers = 400
	sale(t, b, 3, lc)
}

func TestSaleRedisOnly(t *testing.T) {
	b, err := Open(context.Background(), "redis://"+testenv.RedisAddr(t)+"/0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sale(t, b, 3, loadConfig())
}

// TestOrderLifecycle walks one buyer through the API: a reservation, its
// lookup, payment, a replayed POST, a key reused for another body (422)
// and a restock without a token (428).
func TestOrderLifecycle(t *testing.T) {
	b, err := Open(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	svcs, urls, err := StartReplicas(context.Background(), b, Config{Sale: "life"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer StopReplicas(svcs)
	do := func(method, url string, hdr map[string]string, body any) (int, http.Header, map[string]any) {
		t.Helper()
		var v []byte
		if body != nil {
			v, _ = json.Marshal(body)
		}
		a := apiCall(t, method, url, hdr, string(v))
		return a.code, a.hdr, a.body
	}
	key := map[string]string{"Idempotency-Key": randomHex(16)}
	code, _, o := do("POST", urls[0]+"/orders", key, OrderRequest{SKU: "phone", User: "alice", HoldMS: 60_000})
	if code != http.StatusCreated || o["status"] != "reserved" {
		t.Fatalf("reserve: %d %v", code, o)
	}
	id := o["id"].(string)
	code, h, o2 := do("POST", urls[1]+"/orders", key, OrderRequest{SKU: "phone", User: "alice", HoldMS: 60_000})
	if code != http.StatusCreated || o2["id"] != id || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay on the other replica: %d %v %v", code, o2, h)
	}
	if code, _, _ := do("POST", urls[1]+"/orders", key, OrderRequest{SKU: "phone", User: "bob"}); code != http.StatusUnprocessableEntity {
		t.Fatalf("key reused for another body: %d, want 422", code)
	}
	if code, _, _ := do("POST", urls[0]+"/orders", nil, OrderRequest{SKU: "phone", User: "carol"}); code != http.StatusBadRequest {
		t.Fatalf("no Idempotency-Key: %d, want 400", code)
	}
	if code, _, o := do("POST", urls[1]+"/orders/"+id+"/pay", nil, nil); code != http.StatusOK || o["status"] != "paid" {
		t.Fatalf("pay: %d %v", code, o)
	}
	if code, _, o := do("GET", urls[0]+"/orders/"+id, nil, nil); code != http.StatusOK || o["status"] != "paid" {
		t.Fatalf("lookup: %d %v", code, o)
	}
	if code, _, _ := do("GET", urls[0]+"/orders/nope", nil, nil); code != http.StatusNotFound {
		t.Fatalf("unknown order: %d", code)
	}
	if code, _, _ := do("POST", urls[0]+"/admin/products/phone/restock?n=5", nil, nil); code != http.StatusPreconditionRequired {
		t.Fatalf("restock without a token: %d, want 428", code)
	}
	code, _, page := do("GET", urls[0]+"/api/stats", nil, nil)
	if code != http.StatusOK || page["held_locks"] == nil {
		t.Fatalf("stats: %d %v", code, page)
	}
	resp, err := http.Get(urls[0] + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "rejected stale writes") {
		t.Fatalf("page: %s", fmt.Sprint(len(body)))
	}
}

// TestLoadgenCommand runs the load generator's command line with three
// in-process replicas on the embedded default, as `go run
// ./examples/seckill/loadgen -replicas 3` does.
func TestLoadgenCommand(t *testing.T) {
	var out, errs bytes.Buffer
	code := LoadMain(context.Background(), []string{"-replicas", "3", "-buyers", "500", "-stock", "200", "-restock", "10"}, &out, &errs)
	text := out.String()
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, text, errs.String())
	}
	if strings.Contains(text, "\r") {
		t.Errorf("progress into a buffer (not a terminal) has carriage returns:\n%q", text)
	}
	for _, want := range []string{"3 replica(s)", "loadgen: 500/500 buyers", "oversold 0, duplicate charges 0", "invariants: OK", "embedded miniredis"} {
		if !strings.Contains(text, want) {
			t.Fatalf("report lacks %q:\n%s", want, text)
		}
	}
}

// TestServeCommand starts and stops the service as `go run
// ./examples/seckill` does, on a free port.
func TestServeCommand(t *testing.T) {
	var out, errs bytes.Buffer
	code := ServeMain(context.Background(), []string{"-addr", "127.0.0.1:0", "-exit-after-start"}, &out, &errs)
	if code != 0 || !strings.Contains(out.String(), "listening on http://127.0.0.1:") {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errs.String())
	}
}

// TestShutdownMidSale shuts one of three replicas down gracefully while a
// sale runs: its in-flight orders finish, its buyers retry their keys on
// the other replicas, its locks are released, and the invariants hold.
func TestShutdownMidSale(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := Config{Sale: "shutdown-" + randomHex(4), Products: DefaultProducts(300), AdminLease: time.Minute}
	svcs, urls, err := StartReplicas(ctx, b, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = StopReplicas(svcs[:2]) }()

	// The last replica holds an admin lease (a lock) when it goes.
	resp, err := http.Post(urls[2]+"/admin/lease?sku=phone", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	held := func() int {
		snap, err := svcs[0].Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range snap.Locks {
			if strings.Contains(l.Key, ":restock:") {
				n++
			}
		}
		return n
	}
	if held() != 1 {
		t.Fatal("the admin lease is not held")
	}

	done := make(chan Report, 1)
	go func() {
		r, err := RunLoad(ctx, LoadConfig{Targets: urls, Buyers: 600, Concurrency: 32, Abandon: -1})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	time.Sleep(150 * time.Millisecond)
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := svcs[2].Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if n := held(); n != 0 {
		t.Fatalf("%d restock locks still held after the replica holding it shut down", n)
	}
	r := <-done
	var out bytes.Buffer
	r.Print(&out)
	t.Logf("\n%s", out.String())
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if r.Sold != r.Supplied || r.Left != 0 {
		t.Fatalf("sold %d, left %d of %d: want all sold (600 buyers for 300 units)", r.Sold, r.Left, r.Supplied)
	}
}
