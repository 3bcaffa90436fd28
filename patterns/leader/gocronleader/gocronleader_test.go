package gocronleader_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/leader"
	"github.com/lockx-go/lockx/patterns/leader/gocronleader"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	lease  = time.Second
	period = 300 * time.Millisecond
)

// scheduler is a child process running a gocron scheduler whose one job
// (every period) records "<identity> <term> <unix ns>" in a Redis list:
// args are identity, Redis address and key prefix.
var _ = testenv.Role("scheduler", func(args []string) error {
	id, addr, prefix := args[0], args[1], args[2]
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)))
	e, err := leader.New(c, "jobs", leader.WithIdentity(id), leader.WithLease(lease))
	if err != nil {
		return err
	}
	el := gocronleader.New(e)
	ctx := context.Background()
	go el.Run(ctx) //nolint:errcheck // runs until the process is killed
	s, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
	if err != nil {
		return err
	}
	_, err = s.NewJob(gocron.DurationJob(period), gocron.NewTask(func() {
		// Every run is recorded, by a leader or not (term 0): the test
		// checks that gocron ran it only where the Elector said so.
		var term lockx.Token
		if t, ok := el.Term(); ok {
			term = t.Token()
		}
		rdb.RPush(ctx, prefix+"runs", fmt.Sprintf("%s %d %d", id, term, time.Now().UnixNano()))
	}))
	if err != nil {
		return err
	}
	s.Start()
	testenv.Say("READY")
	time.Sleep(time.Hour) // until the test kills it
	return nil
})

type run struct {
	id   string
	term lockx.Token
	at   time.Time
}

// TestThreeSchedulers: of three scheduler processes only the leader runs
// the job; when the leader's process is killed, the job moves to another
// within the lease + one period, under a higher term.
func TestThreeSchedulers(t *testing.T) {
	addr := testenv.RedisAddr(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := "lockxtest:gocronleader:" + rand.Text()[:8] + ":"
	t.Cleanup(func() { rdb.Del(context.Background(), prefix+"runs") })

	children := map[string]*testenv.Child{}
	for i := range 3 {
		id := fmt.Sprintf("s%d", i)
		children[id] = testenv.StartChild(t, "scheduler", id, addr, prefix)
	}
	for _, c := range children {
		c.Expect(t, "READY", 30*time.Second)
	}
	var runs []run
	read := func() {
		vals, err := rdb.LRange(t.Context(), prefix+"runs", int64(len(runs)), -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			f := strings.Fields(v)
			term, _ := strconv.ParseUint(f[1], 10, 64)
			ns, _ := strconv.ParseInt(f[2], 10, 64)
			runs = append(runs, run{f[0], lockx.Token(term), time.Unix(0, ns)})
		}
	}
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(30 * time.Second)
		for read(); !cond(); read() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30 s; runs %+v", what, runs)
			}
			time.Sleep(period / 10)
		}
	}
	waitFor("four runs", func() bool { return len(runs) >= 4 })
	first := runs[0]
	for _, r := range runs {
		if r.id != first.id || r.term != first.term || r.term == 0 {
			t.Fatalf("runs by more than one leader (or term): %+v", runs)
		}
	}

	killed := time.Now()
	children[first.id].Kill(t)
	n := len(runs)
	waitFor("a run by another scheduler", func() bool { return runs[len(runs)-1].id != first.id })
	var moved run
	for _, r := range runs[n:] {
		if r.id == first.id {
			if r.at.After(killed) {
				t.Errorf("the killed leader ran at %v, after the kill", r.at)
			}
			continue
		}
		moved = r
		break
	}
	took := moved.at.Sub(killed)
	t.Logf("job moved from %s (term %d) to %s (term %d) %v after SIGKILL (lease %v, period %v)", first.id, first.term, moved.id, moved.term, took, lease, period)
	if took > lease+period {
		t.Errorf("job moved after %v, want within the lease + one period (%v)", took, lease+period)
	}
	if moved.term <= first.term {
		t.Errorf("new leader's term %d not above %d", moved.term, first.term)
	}
	n = len(runs)
	waitFor("three more runs", func() bool { return len(runs) >= n+3 })
	for _, r := range runs[n:] {
		if r.id != moved.id || r.term != moved.term {
			t.Errorf("after the move, a run by %s term %d, want only %s term %d", r.id, r.term, moved.id, moved.term)
		}
	}
}

// TestIsLeader: IsLeader answers nil only while this instance holds a live
// term, and ErrNotLeader before Run and after it ends.
func TestIsLeader(t *testing.T) {
	c := lockx.New(memlock.New())
	defer c.Close()
	e, err := leader.New(c, "jobs", leader.WithIdentity("a"))
	if err != nil {
		t.Fatal(err)
	}
	el := gocronleader.New(e)
	if err := el.IsLeader(t.Context()); err == nil {
		t.Fatal("IsLeader before Run = nil")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for el.IsLeader(t.Context()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("never became leader")
		}
		time.Sleep(time.Millisecond)
	}
	if tm, ok := el.Term(); !ok || tm.Identity() != "a" {
		t.Errorf("Term = %v, %v", tm, ok)
	}
	cancel()
	<-done
	if err := el.IsLeader(t.Context()); err == nil {
		t.Error("IsLeader after Run ended = nil")
	}
}
