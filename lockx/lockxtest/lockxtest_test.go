package lockxtest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// broken backends: each breaks one promise, and the suite must notice.
type releaseAnyOwner struct {
	*memlock.Backend
	mu      sync.Mutex
	holders map[string]lockx.Owner
}

func (b *releaseAnyOwner) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	r, err := b.Backend.Acquire(ctx, req)
	if r.Acquired {
		b.mu.Lock()
		b.holders[req.Key] = req.Owner
		b.mu.Unlock()
	}
	return r, err
}

// Release frees the key whoever holds it — the classic DEL-without-check bug.
func (b *releaseAnyOwner) Release(ctx context.Context, key string, _ lockx.Owner) error {
	b.mu.Lock()
	holder := b.holders[key]
	b.mu.Unlock()
	return b.Backend.Release(ctx, key, holder)
}

type constantToken struct{ *memlock.Backend }

func (b constantToken) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	r, err := b.Backend.Acquire(ctx, req)
	if r.Acquired {
		r.Token = 1
	}
	return r, err
}

type blindExtend struct{ *memlock.Backend }

// Extend claims success without checking the owner: loss goes unnoticed.
func (blindExtend) Extend(context.Context, string, lockx.Owner, time.Duration) error { return nil }

type alwaysGrant struct{ *memlock.Backend }

func (b alwaysGrant) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	r, err := b.Backend.Acquire(ctx, req)
	if err == nil && !r.Acquired {
		r = driver.Result{Acquired: true, Token: lockx.MaxToken - 1, TTL: req.Lease}
	}
	return r, err
}

func brokenBackend(name string) driver.Backend {
	m := memlock.New()
	switch name {
	case "release-any-owner":
		return &releaseAnyOwner{Backend: m, holders: make(map[string]lockx.Owner)}
	case "constant-token":
		return constantToken{m}
	case "blind-extend":
		return blindExtend{m}
	case "always-grant":
		return alwaysGrant{m}
	}
	panic("unknown broken backend " + name)
}

const brokenEnv = "LOCKXTEST_BROKEN"

// TestSuiteCatchesBrokenBackends shows that the conformance suite can fail:
// it runs the suite in a child process against backends that each break one
// promise and expects the named subtests to fail.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	if name := os.Getenv(brokenEnv); name != "" {
		b := brokenBackend(name)
		lockxtest.Run(t, func(*testing.T) driver.Backend { return b })
		return
	}
	want := map[string][]string{
		"release-any-owner": {"OnlyOwnerExtendsOrReleases", "StaleReleaseKeepsNewOwner"},
		"constant-token":    {"TokensIncrease", "BackendAcquireIdempotent"},
		"blind-extend":      {"LostWhenTakenAway", "OnlyOwnerExtendsOrReleases"},
		"always-grant":      {"MutualExclusion", "TryAcquireHeld"},
	}
	for name, failing := range want {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesBrokenBackends$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a backend that breaks %s:\n%s", name, out)
			}
			for _, sub := range failing {
				if !strings.Contains(string(out), "--- FAIL: TestSuiteCatchesBrokenBackends/"+sub+" ") {
					t.Errorf("subtest %s did not fail for %s", sub, name)
				}
			}
		})
	}
}
