package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
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
