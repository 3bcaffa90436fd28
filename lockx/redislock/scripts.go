package redislock

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (after a
// SCRIPT FLUSH, a restart or a failover to a node that never saw them), so the
// text crosses the wire only then. Every key a script touches is passed in
// KEYS and shares the lock's hash tag, so each script runs on one Cluster
// node; user input reaches the scripts only through KEYS and ARGV.
//
//go:embed scripts/*.lua
var scriptFS embed.FS

var (
	acquireScript = loadScript("queue.lua", "acquire.lua")
	releaseScript = loadScript("queue.lua", "release.lua")
	extendScript  = loadScript("extend.lua")
	ttlScript     = loadScript("ttl.lua")
)

// loadScript concatenates the named files and drops comment-only and blank
// lines: the comments are for readers of the .lua files, not for the wire.
func loadScript(names ...string) *redis.Script {
	var b strings.Builder
	for _, name := range names {
		src, err := scriptFS.ReadFile("scripts/" + name)
		if err != nil {
			panic("redislock: missing embedded script " + name) // a build defect, not input
		}
		for line := range strings.SplitSeq(string(src), "\n") {
			t := strings.TrimSpace(line)
			if t == "" || strings.HasPrefix(t, "--") {
				continue
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return redis.NewScript(b.String())
}

// isNoScript reports a NOSCRIPT reply (go-redis's ErrNoScript is one too).
func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }
