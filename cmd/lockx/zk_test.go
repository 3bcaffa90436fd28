package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/zklock"
)

func TestZooKeeper(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	root := fmt.Sprintf("/lockxcli%08x", rand.Uint32())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := zklock.Dial(ctx, []string{z.Addr}, zklock.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	tokens := map[lockx.Token]string{}
	grant(t, b, "jobs/nightly-report", 1, tokens)
	grant(t, b, "jobs/reindex", 2, tokens)
	base := []string{"--zookeeper", z.Addr, "--zkroot", root}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"zk_ls", []string{"ls"}, exitOK},
		{"zk_inspect_json", []string{"--json", "inspect", "jobs/reindex"}, exitOK},
		{"zk_inspect_missing", []string{"inspect", "nope"}, exitNotHeld},
	} {
		r := runCLI(t, "", append(append([]string{}, base...), tc.args...)...)
		if r.code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr: %s", tc.name, r.code, tc.code, r.errOut)
		}
		golden(t, tc.name, normalize(r.out+r.errOut, tokens))
	}
	r := runCLI(t, "", append(append([]string{}, base...), "--yes", "force-unlock", "jobs/reindex", "--reason", "test", "--audit-file", filepath.Join(t.TempDir(), "audit.jsonl"))...)
	if r.code != exitOK {
		t.Fatalf("force-unlock: exit %d, %s", r.code, r.errOut)
	}
	// ZooKeeper keeps no fences: the report must not claim one.
	if strings.Contains(r.out, "fence raised") || !strings.Contains(r.out, "not fenced") {
		t.Fatalf("force-unlock on ZooKeeper reports %q", r.out)
	}
	if _, err := b.Lock(ctx, "jobs/reindex"); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("after force-unlock: %v", err)
	}
	if err := b.Extend(ctx, "jobs/reindex", owner(2), time.Hour); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("evicted holder's Extend: %v", err)
	}
}
