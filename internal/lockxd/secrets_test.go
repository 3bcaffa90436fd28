package lockxd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/zklock"
)

// withZooKeeper adds ZooKeeper to the backends lockxd serves in these tests.
func withZooKeeper() []backendCase {
	return append(backends(), backendCase{"zookeeper", func(t *testing.T) driver.Backend {
		z := testenv.SharedZooKeeper(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, err := zklock.Dial(ctx, []string{z.Addr}, zklock.WithRoot(fmt.Sprintf("/lockxd-secrets-%d", time.Now().UnixNano())))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}})
}

// The attack: a second client of the same tenant (another API key of
// tenant a) reads the holder of a key from GET /v1/locks and uses what it
// shows to release, extend or re-acquire the first client's hold. Every
// attempt must be refused and the first client must still hold.
func TestHoldSecretsWithinTenant(t *testing.T) {
	for _, bc := range withZooKeeper() {
		t.Run(bc.name, func(t *testing.T) {
			ts := start(t, bc.new(t))
			for _, k := range []struct{ path, extra string }{{"locks", ""}, {"rwlocks", `,"mode":"write"`}, {"semaphores", `,"limit":1`}} {
				t.Run(k.path, func(t *testing.T) {
					base := "/v1/" + k.path
					a := call(t, ts, "key-a", "POST", base+"/try-acquire", `{"key":"victim","lease_ms":30000`+k.extra+`}`)
					if a.status == 501 {
						t.Skipf("%s: %s", bc.name, a.raw)
					}
					if a.status != 200 {
						t.Fatalf("acquire: %d %s", a.status, a.raw)
					}
					secret, _ := a.body["owner"].(string)
					if secret == "" {
						t.Fatalf("the acquirer got no secret: %s", a.raw)
					}
					// What the other client can learn: the listing and the
					// key's entry (locks only: the inspector lists locks).
					var seen []string
					if k.path == "locks" {
						l := call(t, ts, "key-a2", "GET", "/v1/locks", "")
						one := call(t, ts, "key-a2", "GET", "/v1/locks?key=victim", "")
						if l.status != 200 || one.status != 200 {
							t.Fatalf("inspect: %d %s / %d %s", l.status, l.raw, one.status, one.raw)
						}
						if strings.Contains(l.raw, secret) || strings.Contains(one.raw, secret) {
							t.Errorf("inspection shows the hold's secret: %s", one.raw)
						}
						for _, f := range []string{"owner", "holder"} {
							if s, _ := one.body[f].(string); s != "" {
								seen = append(seen, s)
							}
						}
						if len(seen) == 0 {
							t.Fatalf("inspection shows no holder label: %s", one.raw)
						}
					} else {
						seen = []string{"holder"} // nothing to learn: try a guess
					}
					mode := ""
					if k.path == "rwlocks" {
						mode = `,"mode":"write"`
					}
					for _, o := range seen {
						if r := call(t, ts, "key-a2", "POST", base+"/extend", fmt.Sprintf(`{"key":"victim","owner":%q,"lease_ms":1000%s}`, o, mode)); r.status == 200 {
							t.Errorf("another client extended the hold with %q from inspection", o)
						}
						if r := call(t, ts, "key-a2", "POST", base+"/try-acquire", fmt.Sprintf(`{"key":"victim","owner":%q,"lease_ms":30000%s}`, o, k.extra)); r.status == 200 {
							t.Errorf("another client re-acquired the hold with %q from inspection: %s", o, r.raw)
						}
						if r := call(t, ts, "key-a2", "POST", base+"/release", fmt.Sprintf(`{"key":"victim","owner":%q%s}`, o, mode)); r.status == 200 {
							t.Errorf("another client released the hold with %q from inspection", o)
						}
					}
					if r := call(t, ts, "key-a2", "POST", base+"/try-acquire", `{"key":"victim","lease_ms":30000`+k.extra+`}`); r.status != 409 {
						t.Fatalf("the hold did not survive the attempts: a fresh acquire got %d %s", r.status, r.raw)
					}
					// The acquirer's secret still operates its hold.
					if r := call(t, ts, "key-a", "POST", base+"/extend", fmt.Sprintf(`{"key":"victim","owner":%q,"lease_ms":30000%s}`, secret, mode)); r.status != 200 {
						t.Fatalf("the acquirer's extend: %d %s", r.status, r.raw)
					}
					if r := call(t, ts, "key-a", "POST", base+"/release", fmt.Sprintf(`{"key":"victim","owner":%q%s}`, secret, mode)); r.status != 200 {
						t.Fatalf("the acquirer's release: %d %s", r.status, r.raw)
					}
				})
			}
		})
	}
}

// A secret's public part (after its first '~') shows in the label, for
// readers such as patterns/leader; the label still operates nothing.
func TestHolderPublicPart(t *testing.T) {
	ts := start(t, memlock.New())
	secret := "0123456789abcdefghij~worker-7"
	if r := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", fmt.Sprintf(`{"key":"k","lease_ms":30000,"owner":%q}`, secret)); r.status != 200 {
		t.Fatalf("acquire: %d %s", r.status, r.raw)
	}
	one := call(t, ts, "key-a2", "GET", "/v1/locks?key=k", "")
	label, _ := one.body["holder"].(string)
	if !strings.HasPrefix(label, "h-") || !strings.HasSuffix(label, "~worker-7") || strings.Contains(label, "0123456789") || label != string(Holder("a", lockx.Owner(secret))) {
		t.Fatalf("label %q", label)
	}
	if r := call(t, ts, "key-a2", "POST", "/v1/locks/release", fmt.Sprintf(`{"key":"k","owner":%q}`, label)); r.status != 404 {
		t.Fatalf("release by label: %d %s", r.status, r.raw)
	}
}
