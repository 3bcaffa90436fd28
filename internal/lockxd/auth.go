package lockxd

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// TenantSigningKey derives a tenant's token-signing key from the server's
// (Config.TokenSigningKey): HMAC-SHA256(serverKey, "lockxd tenant signing
// key\x00" + tenant). Give each tenant's resources their own derived key,
// never the server's: a tenant's key signs only that tenant's tokens, so
// one tenant's grants cannot pass at another tenant's resources.
func TenantSigningKey(serverKey []byte, tenant string) []byte {
	m := hmac.New(sha256.New, serverKey)
	m.Write([]byte("lockxd tenant signing key\x00"))
	m.Write([]byte(tenant))
	return m.Sum(nil)
}

// TenantConfig is one API key's entry in the keys file. The key itself is
// never stored: only its SHA-256 (hex).
type TenantConfig struct {
	Tenant string `json:"tenant"`
	// SHA256 is the hex SHA-256 of the API key / bearer token.
	SHA256 string `json:"sha256"`
	// MaxHeld bounds the locks, read/write holds and permits the tenant
	// holds at once through this server (0 = unlimited).
	MaxHeld int `json:"max_held"`
	// MaxWaiters bounds the tenant's concurrent waiting acquires (0 = unlimited).
	MaxWaiters int `json:"max_waiters"`
	// Rate is the sustained request rate per second; Burst the bucket size
	// (0 = unlimited).
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
}

type keysFile struct {
	Keys []TenantConfig `json:"keys"`
}

// HashKey returns the hex SHA-256 of an API key, as stored in the keys file.
func HashKey(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

// LoadKeys reads the keys file (JSON) and then the LOCKXD_KEYS env value
// ("tenant=key,tenant2=key2": plaintext, hashed on load).
func LoadKeys(path, env string) ([]TenantConfig, error) {
	var out []TenantConfig
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var kf keysFile
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&kf); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, kf.Keys...)
	}
	if env != "" {
		for _, kv := range strings.Split(env, ",") {
			t, k, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || t == "" || k == "" {
				return nil, errors.New("LOCKXD_KEYS: want tenant=key[,tenant=key...]")
			}
			out = append(out, TenantConfig{Tenant: t, SHA256: HashKey(k)})
		}
	}
	for i, c := range out {
		if !validTenant(c.Tenant) {
			return nil, fmt.Errorf("key %d: bad tenant name %q (want [A-Za-z0-9_.-]{1,64})", i, c.Tenant)
		}
		if b, err := hex.DecodeString(c.SHA256); err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("key %d (tenant %s): sha256 must be 64 hex digits", i, c.Tenant)
		}
		if c.MaxHeld < 0 || c.MaxWaiters < 0 || c.Rate < 0 || c.Burst < 0 {
			return nil, fmt.Errorf("key %d (tenant %s): negative quota", i, c.Tenant)
		}
	}
	return out, nil
}

func validTenant(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// tenant is the runtime state of one tenant: its quotas and usage. Several
// keys may name the same tenant; they share it (the first key's quotas win).
type tenant struct {
	name string
	cfg  TenantConfig
	// signer signs the tenant's grants and checks its fences when the
	// server has a signing key (signing); nil with signing means a key
	// too short to use: every fence is refused.
	signer  *lockx.TokenSigner
	signing bool
	// salt keys the tags of the tenant's backend keys (Config.KeySalt).
	salt []byte

	mu        sync.Mutex
	tokens    float64
	last      time.Time
	held      map[string]time.Time // hold id -> lease expiry (as seen here)
	pending   int
	waiting   int
	nextPurge int
}

type authenticator struct {
	keys    map[[sha256.Size]byte]*tenant
	tenants map[string]*tenant
}

func newAuthenticator(cfgs []TenantConfig) *authenticator {
	a := &authenticator{keys: map[[sha256.Size]byte]*tenant{}, tenants: map[string]*tenant{}}
	for _, c := range cfgs {
		t := a.tenants[c.Tenant]
		if t == nil {
			t = &tenant{name: c.Tenant, cfg: c, held: map[string]time.Time{}, tokens: float64(c.Burst)}
			a.tenants[c.Tenant] = t
		}
		var h [sha256.Size]byte
		b, _ := hex.DecodeString(c.SHA256)
		copy(h[:], b)
		a.keys[h] = t
	}
	return a
}

// lookup finds the tenant of a presented key by its SHA-256: the server
// keeps no plaintext key, and a map look-up by hash leaks nothing useful.
func (a *authenticator) lookup(key string) *tenant {
	if key == "" || len(key) > 1024 {
		return nil
	}
	h := sha256.Sum256([]byte(key))
	return a.keys[h]
}

// allow takes one token from the tenant's bucket; if empty it returns the
// wait until the next token.
func (t *tenant) allow(now time.Time) (bool, time.Duration) {
	if t.cfg.Rate <= 0 {
		return true, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	burst := float64(max(t.cfg.Burst, 1))
	if t.last.IsZero() {
		t.tokens = burst
	} else {
		t.tokens = math.Min(burst, t.tokens+now.Sub(t.last).Seconds()*t.cfg.Rate)
	}
	t.last = now
	if t.tokens >= 1 {
		t.tokens--
		return true, 0
	}
	return false, time.Duration((1 - t.tokens) / t.cfg.Rate * float64(time.Second))
}

// reserve claims a slot for a new hold id. It returns false if the tenant
// is at its MaxHeld; release the claim with settle.
func (t *tenant) reserve(id string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.held[id]; ok || t.cfg.MaxHeld == 0 {
		t.pending++
		return true
	}
	if len(t.held)+t.pending >= t.cfg.MaxHeld {
		t.purge(now)
		if len(t.held)+t.pending >= t.cfg.MaxHeld {
			return false
		}
	}
	t.pending++
	return true
}

// settle ends a reservation; if granted, records the hold until expiry.
func (t *tenant) settle(id string, granted bool, expiry time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending--
	if granted {
		t.held[id] = expiry
		if len(t.held) >= t.nextPurge {
			// Amortized clean-up of holds whose clients let them expire.
			t.purge(time.Now())
			t.nextPurge = max(1024, 2*len(t.held))
		}
	}
}

// purge forgets holds whose lease has passed; t.mu is held.
func (t *tenant) purge(now time.Time) {
	for k, exp := range t.held {
		if !exp.After(now) {
			delete(t.held, k)
		}
	}
}

func (t *tenant) extended(id string, expiry time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held[id] = expiry
}

func (t *tenant) released(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.held, id)
}

func (t *tenant) heldCount(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, exp := range t.held {
		if exp.After(now) {
			n++
		}
	}
	return n
}

// startWait counts a waiter; false if the tenant is at MaxWaiters.
func (t *tenant) startWait() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cfg.MaxWaiters > 0 && t.waiting >= t.cfg.MaxWaiters {
		return false
	}
	t.waiting++
	return true
}

func (t *tenant) endWait() {
	t.mu.Lock()
	t.waiting--
	t.mu.Unlock()
}

// nameOrEmpty is the tenant label of metrics: "" before authentication.
func (t *tenant) nameOrEmpty() string {
	if t == nil {
		return ""
	}
	return t.name
}

// waitCount is the number of the tenant's long-polls and watch streams.
func (t *tenant) waitCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waiting
}
