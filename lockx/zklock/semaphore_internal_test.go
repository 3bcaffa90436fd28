package zklock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// TestSemStaleListingOfAnotherDirectory: a turn's shared listing that
// describes another incarnation of the directory (removed when empty and
// made again) whose version happens to match the current one must not let
// a grant stand: the grant's stat shows the directory's czxid, and the
// grant is taken back. The stale listing is planted by hand: empty, with
// the directory's current version, while another Backend holds the only
// permit.
func TestSemStaleListingOfAnotherDirectory(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func() *Backend {
		b, err := Dial(ctx, []string{z.Addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	b, other := dial(), dial()
	k := "sem-stale-" + string(lockx.NewOwner())[:8]
	req := func() driver.PermitRequest {
		return driver.PermitRequest{Request: driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: 10 * time.Second, Fair: true}, Limit: 1, Count: 1}
	}
	if res, err := other.AcquirePermits(ctx, req()); err != nil || !res.Acquired {
		t.Fatalf("other Backend's grant: %+v %v", res, err)
	}
	dir := b.dirOf(kindSem, k)
	_, st, err := b.conn.Exists(dir)
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.sems[dir] = &semDir{turn: make(chan struct{}, 1), valid: true, exact: true, gen: b.gen,
		dirZxid: st.Czxid - 1, version: st.Version, cversion: st.Cversion}
	b.mu.Unlock()
	res, err := b.AcquirePermits(ctx, req())
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquired {
		t.Fatal("granted a second permit of a semaphore of 1 on a listing of another directory")
	}
	children, _, err := b.conn.Children(dir)
	if err != nil {
		t.Fatal(err)
	}
	holders := 0
	for _, c := range children {
		if strings.Contains(c, "-H") {
			holders++
		}
	}
	if holders != 1 {
		t.Fatalf("%d holder nodes %v, want the other Backend's only", holders, children)
	}
}
