package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Machine describes this machine: CPUs and the CPU model from /proc/cpuinfo.
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (nproc), %s, %s/%s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH)
}

// LoadAvg returns the 1, 5 and 15 minute load averages.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " / ")
}

// Versions lists Go, the servers and the libraries under test.
func Versions(ctx context.Context, e *Env) []string {
	out := []string{"Go: " + runtime.Version()}
	e.mu.Lock()
	var admin *redis.Client
	if len(e.admin) > 0 {
		admin = e.admin[0]
	}
	e.mu.Unlock()
	if admin != nil {
		if m, err := info(ctx, admin, "server"); err == nil {
			out = append(out, fmt.Sprintf("Redis: %s (own redis-server, loopback, no persistence)", m["redis_version"]))
		}
	}
	if pool, err := e.PG(ctx, 1); err == nil {
		var v string
		if pool.QueryRow(ctx, "show server_version").Scan(&v) == nil {
			out = append(out, fmt.Sprintf("PostgreSQL: %s (local, loopback)", v))
		}
		pool.Close()
	}
	var libs []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/redis/go-redis/v9", "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "github.com/jackc/pgx/v5":
				libs = append(libs, d.Path+" "+d.Version)
			}
		}
	}
	out = append(out, "Libraries: "+strings.Join(libs, ", "))
	lockx := "lockx: working tree"
	if rev, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output(); err == nil {
		lockx = "lockx: commit " + strings.TrimSpace(string(rev))
		if st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--", "lockx").Output(); err == nil && len(st) > 0 {
			lockx += " with uncommitted changes under lockx/"
		}
	}
	return append(out, lockx)
}
