package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// noFence is a backend that can list and release locks but keeps no
// fences, as ZooKeeper's: what force-unlock must report truthfully.
type noFence struct {
	driver.Backend
	driver.Inspector
}

// The claim: on a backend without a fence store, force-unlock said "fence
// raised" although nothing was fenced, and its record held only a
// self-described user. It must say what it did on that backend, need a
// reason, and append a record with the OS user and host to the audit file.
func TestForceUnlockTruthful(t *testing.T) {
	ctx := context.Background()
	m := memlock.New()
	defer m.Close()
	res, err := m.Acquire(ctx, driver.Request{Key: "jobs/x", Owner: "stuck-owner", Lease: time.Minute})
	if err != nil || !res.Acquired {
		t.Fatal(res, err)
	}
	var out, errOut bytes.Buffer
	auditFile := filepath.Join(t.TempDir(), "audit", "lockx.jsonl")
	c := &cli{cmd: "force-unlock", in: bufio.NewReader(strings.NewReader("")), out: &out, errOut: &errOut, now: time.Now}
	c.opts.yes, c.opts.timeout, c.opts.auditFile = true, 5*time.Second, auditFile
	b := noFence{m, m}

	if code := c.forceUnlock(ctx, b, "jobs/x"); code != exitUsage || !strings.Contains(errOut.String(), "--reason") {
		t.Fatalf("without --reason: exit %d, %s", code, errOut.String())
	}
	if _, err := m.Lock(ctx, "jobs/x"); err != nil {
		t.Fatalf("refused force-unlock freed the lock: %v", err)
	}
	c.opts.reason = "holder hung, ticket OPS-1"
	if code := c.forceUnlock(ctx, b, "jobs/x"); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if strings.Contains(out.String(), "fence raised") || !strings.Contains(out.String(), "not fenced") {
		t.Errorf("on a backend without fences: %q", out.String())
	}
	data, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	var rec auditRecord
	if err := json.Unmarshal(bytes.TrimSpace(data), &rec); err != nil {
		t.Fatalf("audit file %q: %v", data, err)
	}
	u, _ := user.Current()
	host, _ := os.Hostname()
	if rec.Reason != c.opts.reason || rec.OSUser != u.Username || rec.UID != u.Uid || rec.Host != host || rec.Fenced || rec.Key != "jobs/x" || rec.Owner != "stuck-owner" {
		t.Fatalf("audit record %+v", rec)
	}

	// With a fence store it says so, and the record says fenced.
	out.Reset()
	if res, err := m.Acquire(ctx, driver.Request{Key: "jobs/y", Owner: "stuck-owner", Lease: time.Minute}); err != nil || !res.Acquired {
		t.Fatal(res, err)
	}
	if code := c.forceUnlock(ctx, m, "jobs/y"); code != exitOK || !strings.Contains(out.String(), "fence raised") {
		t.Fatalf("with a fence store: exit %d %q", code, out.String())
	}
	data, _ = os.ReadFile(auditFile)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"fenced":true`) {
		t.Fatalf("audit file after two evictions: %q", data)
	}
}
