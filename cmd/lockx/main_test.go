package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/internal/wallclock"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var update = flag.Bool("update", false, "rewrite the golden files")

// owner returns a fixed owner id, so that outputs are reproducible.
func owner(n int) lockx.Owner { return lockx.Owner(fmt.Sprintf("%032x", n)) }

type result struct {
	code        int
	out, errOut string
}

func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut, func(string) string { return "" })
	return result{code, out.String(), errOut.String()}
}

// durations are the only parts of an output that vary between runs.
var (
	durRE  = regexp.MustCompile(`\b\d+s\b|"(ttl_ms|age_ms)":\d+`)
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
)

func normalize(s string, tokens map[lockx.Token]string) string {
	s = timeRE.ReplaceAllString(s, "<time>")
	s = durRE.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, `"`) {
			return m[:strings.Index(m, ":")+1] + "0"
		}
		return strings.Repeat("#", len(m)-1) + "s"
	})
	for tok, name := range tokens {
		s = regexp.MustCompile(`\b`+fmt.Sprint(uint64(tok))+`\b`).ReplaceAllString(s, name)
	}
	return s
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: output differs from %s\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// grant takes key for owner(n) for an hour through b and names its token.
func grant(t *testing.T, b driver.Backend, key string, n int, tokens map[lockx.Token]string) lockx.Token {
	t.Helper()
	res, err := b.Acquire(context.Background(), driver.Request{Key: key, Owner: owner(n), Lease: time.Hour})
	if err != nil || !res.Acquired {
		t.Fatalf("grant %s: %+v %v", key, res, err)
	}
	tokens[res.Token] = fmt.Sprintf("<token%d>", n)
	return res.Token
}

func TestRedis(t *testing.T) {
	addr := testenv.RedisAddr(t)
	prefix := fmt.Sprintf("lockxcli%08x:", rand.Uint32())
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	b := redislock.New(rdb, redislock.WithPrefix(prefix))
	t.Cleanup(func() { _ = b.Close() })
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	tokens := map[lockx.Token]string{}
	tok1 := grant(t, b, "jobs/nightly-report", 1, tokens)
	grant(t, b, "jobs/reindex", 2, tokens)
	grant(t, b, "orders/42", 3, tokens)
	// A fair waiter on jobs/reindex.
	if _, err := b.Acquire(context.Background(), driver.Request{Key: "jobs/reindex", Owner: owner(9), Lease: time.Second, Fair: true, Wait: true, QueueTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	base := []string{"--redis", "redis://" + addr + "/0", "--prefix", prefix}
	cli := func(stdin string, args ...string) result {
		return runCLI(t, stdin, append(append([]string{}, base...), args...)...)
	}

	cases := []struct {
		name string
		args []string
		code int
	}{
		{"redis_ls", []string{"ls"}, exitOK},
		{"redis_ls_prefix", []string{"ls", "jobs/"}, exitOK},
		{"redis_ls_json", []string{"--json", "ls", "jobs/"}, exitOK},
		{"redis_inspect", []string{"inspect", "jobs/reindex"}, exitOK},
		{"redis_inspect_json", []string{"--json", "inspect", "orders/42"}, exitOK},
		{"redis_inspect_missing", []string{"inspect", "nope"}, exitNotHeld},
		{"redis_watch_json", []string{"--json", "watch", "--count", "2", "--interval", "10ms", "--long", "1ns", "orders/"}, exitOK},
		{"redis_watch", []string{"watch", "orders/", "--count", "1", "--long", "1h"}, exitOK},
	}
	for _, tc := range cases {
		r := cli("", tc.args...)
		if r.code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr: %s", tc.name, r.code, tc.code, r.errOut)
		}
		golden(t, tc.name, normalize(r.out+r.errOut, tokens))
	}

	// force-unlock: refused confirmation leaves the lock alone.
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	r := cli("wrong\n", "force-unlock", "jobs/nightly-report", "--reason", "test", "--audit-file", audit)
	if r.code != exitAborted {
		t.Fatalf("declined force-unlock: exit %d, %s", r.code, r.errOut)
	}
	golden(t, "redis_force_unlock_declined", normalize(r.out+r.errOut, tokens))
	if _, err := b.Lock(context.Background(), "jobs/nightly-report"); err != nil {
		t.Fatalf("declined force-unlock freed the lock: %v", err)
	}
	// Confirmed: the lock is freed, its fence raised, the act recorded.
	r = cli("jobs/nightly-report\n", "--json", "force-unlock", "jobs/nightly-report", "--reason", "test", "--audit-file", audit)
	if r.code != exitOK {
		t.Fatalf("force-unlock: exit %d, %s", r.code, r.errOut)
	}
	var rec auditRecord
	if err := json.Unmarshal([]byte(r.out), &rec); err != nil {
		t.Fatalf("%v: %q", err, r.out)
	}
	if rec.Key != "jobs/nightly-report" || rec.Token != uint64(tok1) || rec.Owner != string(owner(1)) || rec.By == "" || rec.Audit == "" {
		t.Fatalf("record %+v", rec)
	}
	if _, err := b.Lock(context.Background(), "jobs/nightly-report"); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("after force-unlock: %v", err)
	}
	if err := b.Fence(context.Background(), "jobs/nightly-report", tok1); !errors.Is(err, lockx.ErrStaleToken) {
		t.Fatalf("evicted holder's write: %v", err)
	}
	stored, err := b.LoadResult(context.Background(), rec.Audit)
	if err != nil || !strings.Contains(string(stored.Value), `"force-unlock"`) {
		t.Fatalf("audit record: %s %v", stored.Value, err)
	}
	if r := cli("", "--yes", "force-unlock", "jobs/nightly-report", "--reason", "test", "--audit-file", audit); r.code != exitNotHeld {
		t.Fatalf("force-unlock of a free key: exit %d", r.code)
	}

	// cron: runs recorded by a cronguard BackendStore in the backend.
	store, err := cronguard.NewBackendStore(b, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	locks := lockx.New(b)
	t.Cleanup(func() { _ = locks.Close() })
	cl, err := cronguard.NewClaimer(locks, "nightly", cronguard.Every(time.Hour), cronguard.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	for i, errText := range []string{"", "upstream timeout"} {
		trig, _ := cl.Trigger(wallclock.Now().Add(-time.Duration(i+1) * time.Hour)) // the clock the cron command reads
		run := cronguard.Run{Job: "nightly", Trigger: trig, Instance: fmt.Sprintf("host-%c", 'a'+i), Token: lockx.Token(7 + i),
			Started: trig.Add(time.Second), Duration: 1500 * time.Millisecond, Error: errText}
		if err := store.Record(context.Background(), run); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"redis_cron", []string{"cron", "nightly", "--every", "1h"}, exitOK},
		{"redis_cron_json", []string{"--json", "cron", "nightly", "--every", "1h", "--runs", "1"}, exitOK},
		{"redis_cron_none", []string{"cron", "weekly", "--every", "1h"}, exitNotHeld},
	} {
		r := cli("", tc.args...)
		if r.code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr: %s", tc.name, r.code, tc.code, r.errOut)
		}
		golden(t, tc.name, normalize(r.out+r.errOut, tokens))
	}
	if r := cli("", "cron", "nightly"); r.code != exitUsage {
		t.Errorf("cron without --every: exit %d", r.code)
	}
}

func TestPostgres(t *testing.T) {
	dsn := testenv.PostgresURL(t)
	schema := fmt.Sprintf("lockx_cli_%08x", rand.Uint32())
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	for _, migrate := range []func(context.Context, *pgxpool.Pool, ...pglock.Option) error{pglock.Migrate, pglock.MigrateFences, pglock.MigrateResults} {
		if err := migrate(context.Background(), pool, pglock.WithSchema(schema)); err != nil {
			t.Fatal(err)
		}
	}
	b := pglock.New(pool, pglock.WithSchema(schema))
	t.Cleanup(func() { _ = b.Close() })
	tokens := map[lockx.Token]string{}
	grant(t, b, "jobs/nightly-report", 1, tokens)
	grant(t, b, "jobs/reindex", 2, tokens)
	base := []string{"--postgres", dsn, "--schema", schema}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"pg_ls", []string{"ls"}, exitOK},
		{"pg_inspect_json", []string{"--json", "inspect", "jobs/reindex"}, exitOK},
		{"pg_inspect_missing", []string{"inspect", "nope"}, exitNotHeld},
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
	if _, err := b.Lock(context.Background(), "jobs/reindex"); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("after force-unlock: %v", err)
	}
}

// recordingRedisLogger keeps what go-redis logs.
type recordingRedisLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingRedisLogger) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

// TestMessages pins every message a newcomer meets on a mistake: one line
// that says what is wrong, plus the --help hint for usage errors; the
// command that failed named in backend errors; nothing from go-redis.
func TestMessages(t *testing.T) {
	addr := testenv.RedisAddr(t)
	rec := &recordingRedisLogger{}
	redis.SetLogger(rec)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"msg_bad_flag", []string{"--bogus", "ls"}, exitUsage},
		{"msg_flag_needs_value", []string{"ls", "--redis"}, exitUsage},
		{"msg_flag_bad_value", []string{"--timeout", "soon", "ls"}, exitUsage},
		{"msg_no_backend", []string{"ls"}, exitUsage},
		{"msg_unknown_command", []string{"--redis", addr, "frobnicate"}, exitUsage},
		{"msg_inspect_no_key", []string{"--redis", addr, "inspect"}, exitUsage},
		{"msg_force_unlock_no_key", []string{"--redis", addr, "force-unlock"}, exitUsage},
		{"msg_cron_no_job", []string{"--redis", addr, "cron", "--every", "1h"}, exitUsage},
		{"msg_extra_argument", []string{"--redis", addr, "ls", "a/", "b/"}, exitUsage},
		{"msg_redis_not_url", []string{"--redis", "not a url", "ls"}, exitUsage},
		{"msg_redis_bad_scheme", []string{"--redis", "http://127.0.0.1:6379", "ls"}, exitUsage},
		{"msg_redis_bad_port", []string{"--redis", "127.0.0.1:port", "ls"}, exitUsage},
		// host:port means redis://host:port: these reach the server.
		{"msg_redis_host_port", []string{"--redis", addr, "inspect", "lockx-cli-never-held"}, exitNotHeld},
		{"msg_ls_unreachable", []string{"--redis", "127.0.0.1:1", "ls"}, exitFailed},
		{"msg_inspect_unreachable", []string{"--redis", "127.0.0.1:1", "inspect", "orders/42"}, exitFailed},
	} {
		r := runCLI(t, "", tc.args...)
		if r.code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr: %s", tc.name, r.code, tc.code, r.errOut)
		}
		if r.out != "" {
			t.Errorf("%s: stdout %q, want nothing", tc.name, r.out)
		}
		golden(t, tc.name, r.errOut)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.lines) > 0 {
		t.Errorf("go-redis logged %d lines, the first: %s", len(rec.lines), rec.lines[0])
	}
}

func TestUsage(t *testing.T) {
	if r := runCLI(t, ""); r.code != exitUsage || !strings.Contains(r.errOut, "commands:") {
		t.Errorf("no arguments: exit %d, want %d and the usage; stderr %q", r.code, exitUsage, r.errOut)
	}
	if r := runCLI(t, "", "-h"); r.code != exitOK || !strings.Contains(r.out, "exit codes") || !strings.Contains(r.out, "host:port alone means redis://host:port") {
		t.Errorf("-h: %d %q", r.code, r.out)
	}
}
