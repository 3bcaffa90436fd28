package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// waitSlack is what WithWait(d) promises beyond d: Acquire returns within
// d + 100 ms whatever the backend does.
const waitSlack = 100 * time.Millisecond

// waitFault is one way for a backend to misbehave while an Acquire waits.
type waitFault struct {
	name string
	// addr returns where the waiting client dials, given the server's
	// address: a Proxy faulted by inject, or a port nobody listens on.
	addr   func(t *testing.T, server string) (string, *Proxy)
	inject func(p *Proxy, d time.Duration)
}

var waitFaults = []waitFault{
	{name: "down", addr: func(t *testing.T, _ string) (string, *Proxy) { return refusedAddr(t), nil }},
	{name: "hanging", addr: viaProxy, inject: func(p *Proxy, _ time.Duration) {
		p.SetBlackhole(Upstream, true)
		p.SetBlackhole(Downstream, true)
	}},
	{name: "slow", addr: viaProxy, inject: func(p *Proxy, d time.Duration) { p.SetLatency(Downstream, 3*d) }},
}

func viaProxy(t *testing.T, server string) (string, *Proxy) {
	t.Helper()
	p, err := NewProxy(server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p.Addr, p
}

// refusedAddr is a loopback address that refuses connections: a port
// listened on and closed again.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestFaultWaitBudget (in a file named to run before TestFault, which
// writes the report its rows go into) checks WithWait's promise under faults: with the lock
// held elsewhere, Acquire(WithWait(d)) returns ErrNotAcquired within
// d + 100 ms while its backend is down (connections refused), hanging
// (connections accepted, nothing answered) or slow (replies three budgets
// late), on Redis (go-redis with its default timeouts: 3 s reads, 5 s
// dials) and PostgreSQL. Each call is timed on the monotonic clock.
func TestFaultWaitBudget(t *testing.T) {
	const wait = time.Second
	backends := []struct {
		name string
		// server returns the lock server's address; open a Client that
		// reaches it at addr, and hold key there directly.
		server func(t *testing.T) string
		open   func(t *testing.T, addr string) *lockx.Client
		hold   func(t *testing.T, key string)
	}{
		{
			name: "redis",
			server: func(t *testing.T) string {
				return testenv.StartRedis(t).Addr
			},
			open: func(t *testing.T, addr string) *lockx.Client {
				rdb := redis.NewClient(&redis.Options{Addr: addr})
				c := lockx.New(redislock.New(rdb))
				t.Cleanup(func() { c.Close(); rdb.Close() })
				return c
			},
		},
		{
			name:   "postgres",
			server: func(t *testing.T) string { return pgAddr(t, testenv.PostgresURL(t)) },
			open: func(t *testing.T, addr string) *lockx.Client {
				pool, err := pgxpool.New(context.Background(), pgVia(t, testenv.PostgresURL(t), addr, "connect_timeout=10"))
				if err != nil {
					t.Fatal(err)
				}
				c := lockx.New(pglock.New(pool))
				t.Cleanup(func() { c.Close(); pool.Close() })
				return c
			},
		},
	}
	for _, be := range backends {
		for _, f := range waitFaults {
			t.Run(be.name+"/"+f.name, func(t *testing.T) {
				server := be.server(t)
				key := "faults/wait/" + t.Name()
				holder := be.open(t, server)
				l, err := holder.Acquire(ctxFor(t, 10*time.Second), key)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Release(ctxFor(t, 5*time.Second)) })
				addr, p := f.addr(t, server)
				waiter := be.open(t, addr)
				if p != nil {
					// A first refusal through the proxy, so the waiter has
					// connections (and, on Redis, its subscription) to lose.
					if _, err := waiter.TryAcquire(ctxFor(t, 10*time.Second), key); !errors.Is(err, lockx.ErrNotAcquired) {
						t.Fatalf("TryAcquire before the fault: %v, want ErrNotAcquired", err)
					}
					f.inject(p, wait)
				}
				t0 := Now()
				_, err = waiter.Acquire(ctxFor(t, 30*time.Second), key, lockx.WithWait(wait))
				took := time.Duration(Now() - t0)
				t.Logf("Acquire(WithWait(%v)) returned after %v: %v", wait, took.Round(time.Millisecond), err)
				if !errors.Is(err, lockx.ErrNotAcquired) {
					t.Errorf("err = %v, want ErrNotAcquired", err)
				}
				if took > wait+waitSlack {
					t.Errorf("Acquire(WithWait(%v)) took %v, more than the budget plus %v", wait, took, waitSlack)
				}
				noteReport(&waitNotes, fmt.Sprintf("| %s | %s | %v | %s |", be.name, f.name, wait, took.Round(time.Millisecond)))
				if p != nil {
					p.Close() // the waiter's connections end, so its Close is quick
				}
			})
		}
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
