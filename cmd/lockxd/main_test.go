package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/httplock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestRunGraceful(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan int, 1)
	env := map[string]string{"LOCKXD_KEYS": "a=key-a"}
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--memory", "--listen", "127.0.0.1:0"}, &stderr, func(k string) string { return env[k] }, ready)
	}()
	addr := <-ready
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := hc.Get("http://" + addr + "/healthz")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("healthz: %v", err)
	}
	res.Body.Close()
	hc.CloseIdleConnections()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no graceful exit")
	}
	if code := run(context.Background(), []string{"--memory"}, io.Discard, func(string) string { return "" }, nil); code != 2 {
		t.Fatalf("no keys: exit %d", code)
	}
}

// TestStartLog checks that the start-up line names the backend and where it
// is, the listen address, the tenant count and the TLS state.
func TestStartLog(t *testing.T) {
	redisAddr := testenv.RedisAddr(t)
	pg := testenv.PostgresURL(t)
	pgc, err := pgxpool.ParseConfig(pg)
	if err != nil {
		t.Fatal(err)
	}
	pgAddr := net.JoinHostPort(pgc.ConnConfig.Host, strconv.Itoa(int(pgc.ConnConfig.Port)))
	env := map[string]string{"LOCKXD_KEYS": "a=key-a,b=key-b"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--memory"}, "backend=memory backend_addr=in-process tenants=2 tls=false"},
		{[]string{"--redis", "redis://" + redisAddr + "/0"}, "backend=redis backend_addr=" + redisAddr + " tenants=2 tls=false"},
		{[]string{"--redis", redisAddr}, "backend=redis backend_addr=" + redisAddr + " tenants=2 tls=false"}, // host:port, as the CLI takes it
		{[]string{"--postgres", pg}, "backend=postgres backend_addr=" + pgAddr + " tenants=2 tls=false"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan string, 1)
		done := make(chan int, 1)
		var stderr bytes.Buffer
		go func() {
			done <- run(ctx, append(tc.args, "--listen", "127.0.0.1:0"), &stderr, func(k string) string { return env[k] }, ready)
		}()
		addr := <-ready
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, stderr.String())
		}
		line, _, _ := strings.Cut(stderr.String(), "\n")
		if want := `msg="lockxd listening" addr=` + addr + " " + tc.want; !strings.Contains(line, want) {
			t.Errorf("%v: start-up line\n%s\nwant it to contain\n%s", tc.args, line, want)
		}
	}
}

// TestBadRedisFlag checks that a --redis lockxd cannot read is refused at
// start with the value and the forms it accepts, the same message as the CLI.
func TestBadRedisFlag(t *testing.T) {
	env := map[string]string{"LOCKXD_KEYS": "a=key-a"}
	for _, v := range []string{"not a url", "http://127.0.0.1:6379", "127.0.0.1:port"} {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"--redis", v, "--listen", "127.0.0.1:0"}, &stderr, func(k string) string { return env[k] }, nil)
		if code == 0 {
			t.Fatalf("--redis %q: exit 0", v)
		}
		if want := `--redis \"` + v + `\"`; !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "want host:port or redis://") {
			t.Errorf("--redis %q: stderr\n%s\nwant the value and the accepted forms", v, stderr.String())
		}
	}
}

// TestRunZooKeeper serves locks from ZooKeeper: a lock taken through the
// HTTP API excludes a second client and is released.
func TestRunZooKeeper(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan int, 1)
	env := map[string]string{"LOCKXD_KEYS": "a=key-a"}
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--zookeeper", z.Addr, "--zkroot", "/lockxd-test", "--listen", "127.0.0.1:0", "--grace", "1s"}, &stderr, func(k string) string { return env[k] }, ready)
	}()
	addr := <-ready
	c1, c2 := lockx.New(httplock.New("http://"+addr, "key-a")), lockx.New(httplock.New("http://"+addr, "key-a"))
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer acancel()
	l, err := c1.Acquire(actx, "orders/42")
	if err != nil {
		t.Fatalf("Acquire through lockxd on ZooKeeper: %v", err)
	}
	if _, err := c2.TryAcquire(actx, "orders/42"); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("second client's TryAcquire = %v, want ErrNotAcquired", err)
	}
	if err := l.Release(actx); err != nil {
		t.Fatal(err)
	}
	l2, err := c2.TryAcquire(actx, "orders/42")
	if err != nil {
		t.Fatalf("TryAcquire after release: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d not above %d", l2.Token(), l.Token())
	}
	_ = l2.Release(actx)
	_ = c1.Close()
	_ = c2.Close()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no graceful exit")
	}
}
