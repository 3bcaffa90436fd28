package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/leader"
)

// TestLeader: `lockx leader NAME` names the leader and its term, says when
// there is none (exit 3), and --watch follows a handover.
func TestLeader(t *testing.T) {
	addr := testenv.RedisAddr(t)
	prefix := fmt.Sprintf("lockxcli%08x:", rand.Uint32())
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	locks := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)))
	t.Cleanup(func() { _ = locks.Close() })
	base := []string{"--redis", addr, "--prefix", prefix}
	cli := func(args ...string) result { return runCLI(t, "", append(append([]string{}, base...), args...)...) }

	if r := cli("leader", "billing"); r.code != exitNotHeld || !strings.Contains(r.errOut, "not held") {
		t.Errorf("no leader: exit %d, stderr %q; want %d", r.code, r.errOut, exitNotHeld)
	}
	ctx := context.Background()
	ea, _ := leader.New(locks, "billing", leader.WithIdentity("node-a"))
	eb, _ := leader.New(locks, "billing", leader.WithIdentity("node-b"))
	ta, err := ea.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := cli("leader", "billing")
	if want := fmt.Sprintf("billing: leader node-a, term %d, since ?, lease left ", ta.Token()); r.code != exitOK || !strings.HasPrefix(r.out, want) {
		t.Errorf("leader: exit %d, out %q; want %q…", r.code, r.out, want)
	}
	r = cli("--json", "leader", "billing")
	var li leaderInfo
	if err := json.Unmarshal([]byte(r.out), &li); err != nil || li.Leader != "node-a" || li.Term != uint64(ta.Token()) || li.Election != "billing" {
		t.Errorf("leader --json: %q (%v)", r.out, err)
	}

	// --watch sees node-a, then node-b after the handover.
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errOut strings.Builder
		args := append(append([]string{}, base...), "leader", "billing", "--watch", "--interval", "20ms", "--count", "2")
		done <- run(args, strings.NewReader(""), pw, &errOut, func(string) string { return "" })
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), fmt.Sprintf("billing: leader node-a, term %d", ta.Token())) {
		t.Fatalf("leader --watch, first line %q; want node-a", lines.Text())
	}
	next := make(chan *leader.Term, 1)
	go func() {
		tb, err := eb.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		next <- tb
	}()
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	tb := <-next
	if tb == nil {
		return
	}
	defer tb.Resign(ctx)
	// A vacancy may be seen between the two terms.
	var second string
	for lines.Scan() {
		if second = lines.Text(); !strings.HasSuffix(second, "no leader") {
			break
		}
	}
	if !strings.HasPrefix(second, fmt.Sprintf("billing: leader node-b, term %d", tb.Token())) {
		t.Errorf("leader --watch after the handover: %q; want node-b", second)
	}
	for lines.Scan() {
	}
	if code := <-done; code != exitOK {
		t.Errorf("leader --watch --count 2: exit %d", code)
	}
}

// TestLeaderQuorum: with several --redis URLs the CLI opens a Redlock
// quorum and names the leader a majority of the nodes agree on.
func TestLeaderQuorum(t *testing.T) {
	var addrs []string
	var rdbs []redis.UniversalClient
	for range 3 {
		s := testenv.StartRedis(t)
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		addrs, rdbs = append(addrs, s.Addr), append(rdbs, rdb)
	}
	prefix := fmt.Sprintf("lockxcli%08x:", rand.Uint32())
	q := redislock.NewQuorum(rdbs, redislock.WithPrefix(prefix))
	locks := lockx.New(q)
	t.Cleanup(func() { _ = locks.Close(); _ = q.Close() })
	base := []string{"--redis", strings.Join(addrs, ","), "--prefix", prefix}
	cli := func(args ...string) result { return runCLI(t, "", append(append([]string{}, base...), args...)...) }

	if r := cli("leader", "billing"); r.code != exitNotHeld {
		t.Errorf("no leader: exit %d, stderr %q; want %d", r.code, r.errOut, exitNotHeld)
	}
	e, _ := leader.New(locks, "billing", leader.WithIdentity("node-a"))
	tm, err := e.Campaign(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Resign(context.Background())
	r := cli("leader", "billing")
	if want := fmt.Sprintf("billing: leader node-a, term %d, since ?, lease left ", tm.Token()); r.code != exitOK || !strings.HasPrefix(r.out, want) {
		t.Errorf("leader on a quorum: exit %d, out %q, stderr %q; want %q…", r.code, r.out, r.errOut, want)
	}
}
