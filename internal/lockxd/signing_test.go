package lockxd

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
)

var serverSigningKey = []byte("lockxd server signing key, 32 b!")

// The attack: a client of the tenant posts the highest token there is to
// POST /v1/fence for a resource; the fence never goes down again, and every
// real holder's write is refused from then on. With a signing key the
// server signs each grant's token and POST /v1/fence accepts only a token
// with its signature, so the unsigned, forged or raised token is refused
// (problem+json) and the real holder's token still passes.
func TestSignedFence(t *testing.T) {
	forge := fmt.Sprintf(`{"resource":"orders/42","token":"%d"}`, lockx.MaxToken)

	t.Run("unsigned server: the attack works", func(t *testing.T) {
		ts := start(t, memlock.New())
		g := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"orders/42","lease_ms":30000}`)
		if r := call(t, ts, "key-a2", "POST", "/v1/fence", forge); r.status != 200 {
			t.Fatalf("forged fence: %d %s", r.status, r.raw)
		}
		if r := call(t, ts, "key-a", "POST", "/v1/fence", fmt.Sprintf(`{"resource":"orders/42","token":%q}`, g.body["token"])); r.status != 409 {
			t.Fatalf("holder after the forged fence: %d %s", r.status, r.raw)
		}
	})

	t.Run("signing server", func(t *testing.T) {
		srv := NewServer(memlock.New(), Config{Tenants: tenants(), TokenSigningKey: serverSigningKey})
		ts := httptest.NewServer(srv)
		defer ts.Close()
		g := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"orders/42","lease_ms":30000}`)
		sig, _ := g.body["signature"].(string)
		tok, _ := g.body["token"].(string)
		if g.status != 200 || sig == "" {
			t.Fatalf("grant without a signature: %s", g.raw)
		}
		// The tenant's resource side verifies with the tenant's key.
		rs, _ := lockx.NewTokenSigner(TenantSigningKey(serverSigningKey, "a"))
		parsed, _ := lockx.ParseToken(tok)
		if err := rs.Verify("orders/42", parsed, sig); err != nil {
			t.Fatalf("grant's signature with the tenant key: %v", err)
		}
		other, _ := lockx.NewTokenSigner(TenantSigningKey(serverSigningKey, "b"))
		for _, c := range []struct {
			name, body string
			status     int
			code       string
		}{
			{"unsigned max token", forge, 428, "signature-required"},
			{"forged signature", fmt.Sprintf(`{"resource":"orders/42","token":"%d","signature":%q}`, lockx.MaxToken, other.Sign("orders/42", lockx.MaxToken)), 403, "forged-token"},
			{"grant's signature, raised token", fmt.Sprintf(`{"resource":"orders/42","token":"%d","signature":%q}`, parsed+1000, sig), 403, "forged-token"},
			{"grant's signature, other resource", fmt.Sprintf(`{"resource":"orders/43","token":%q,"signature":%q}`, tok, sig), 403, "forged-token"},
		} {
			r := call(t, ts, "key-a2", "POST", "/v1/fence", c.body)
			if r.status != c.status || r.body["code"] != c.code {
				t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.raw, c.status, c.code)
			}
		}
		// Another tenant's grant does not sign for tenant a's resources.
		gb := call(t, ts, "key-b", "POST", "/v1/locks/try-acquire", `{"key":"orders/42","lease_ms":30000}`)
		if r := call(t, ts, "key-a", "POST", "/v1/fence", fmt.Sprintf(`{"resource":"orders/42","token":%q,"signature":%q}`, gb.body["token"], gb.body["signature"])); r.status != 403 {
			t.Errorf("tenant b's grant at tenant a's fence: %d %s", r.status, r.raw)
		}
		if r := call(t, ts, "key-a", "POST", "/v1/fence", fmt.Sprintf(`{"resource":"orders/42","token":%q,"signature":%q}`, tok, sig)); r.status != 200 {
			t.Fatalf("the holder's signed token: %d %s", r.status, r.raw)
		}
	})
}

func TestTenantSigningKeysDiffer(t *testing.T) {
	a, b := TenantSigningKey(serverSigningKey, "a"), TenantSigningKey(serverSigningKey, "b")
	if string(a) == string(b) || len(a) < lockx.MinSigningKeyLen {
		t.Fatalf("tenant keys %x %x", a, b)
	}
}
