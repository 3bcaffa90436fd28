package redislock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// The fence scripts share fence.lua, the check itself.
var (
	fenceScript     = loadScript("fence.lua", "fence_check.lua")
	fencedSetScript = loadScript("fence.lua", "fenced_set.lua")
)

var _ driver.FenceStore = (*Backend)(nil)

// fenceKey names the string that holds the highest token accepted for
// resource: prefix + "f:{resource}". The resource is the hash tag, so the
// fence and the user's data keys tagged with it ("doc:{docs/1}") live on one
// Cluster node and one script can check and write. Resources starting with
// '}' take the fixed tag "#", as lock keys do. Fence keys never expire:
// resources are bounded by the user's data, and a fence that forgot its
// token would accept a stale writer again.
func (b *Backend) fenceKey(resource string) string {
	if resource[0] == '}' {
		return b.cfg.prefix + "f:#{#}" + resource
	}
	return b.cfg.prefix + "f:{" + resource + "}"
}

// Fence implements lockx.FenceStore with one script call: GET, compare and
// SET of the resource's fence key. Like the lock scripts it goes through the
// batcher (WithAutoPipeline), so concurrent checks share round trips. A Backend is a fence store on its own —
// the resource need not be locked through Redis — and several services share
// fences by sharing the prefix.
func (b *Backend) Fence(ctx context.Context, resource string, token driver.Token) error {
	if err := b.fenceArgs(ctx, resource, token); err != nil {
		return err
	}
	c := &call{}
	c.args[2], c.args[3], c.args[4] = "1", b.fenceKey(resource), uint64(token)
	seen, err := b.eval(ctx, fenceScript, c, 5)
	if err != nil {
		return backendkit.Fail(ctx, "fence", err)
	}
	return staleError(resource, token, seen)
}

// FencedSet writes value to key (SET, with PX ttl when ttl > 0) only if
// token is current for resource, in one script: the fencing check and the
// write are one atomic step, so no newer holder can write in between. A
// stale token returns a *lockx.StaleTokenError and writes nothing.
//
//	err := b.FencedSet(ctx, "docs/1", l.Token(), "doc:{docs/1}", body, 0)
//
// On Redis Cluster a script may only touch keys of one slot: key must carry
// the resource as its hash tag ("…{resource}…", the first braces of the
// name), or FencedSet refuses it with an *lockx.ArgError before sending
// anything. Tag data keys that way on a single node too, and the code keeps
// working when the data moves to a Cluster.
func (b *Backend) FencedSet(ctx context.Context, resource string, token driver.Token, key string, value any, ttl time.Duration) error {
	if err := b.fenceArgs(ctx, resource, token); err != nil {
		return err
	}
	if key == "" {
		return &driver.ArgError{Arg: "key", Reason: "empty"}
	}
	if ttl < 0 {
		return &driver.ArgError{Arg: "ttl", Reason: "must not be negative"}
	}
	fk := b.fenceKey(resource)
	if _, cluster := b.rdb.(*redis.ClusterClient); cluster && hashTag(key) != hashTag(fk) {
		return &driver.ArgError{Arg: "key", Reason: fmt.Sprintf("on Redis Cluster it must carry the hash tag {%s} of the resource", hashTag(fk))}
	}
	c := &call{}
	c.args[2], c.args[3], c.args[4] = "2", fk, key
	c.args[5], c.args[6], c.args[7] = uint64(token), value, millis(ttl)
	seen, err := b.eval(ctx, fencedSetScript, c, 8)
	if err != nil {
		return backendkit.Fail(ctx, "fenced set", err)
	}
	return staleError(resource, token, seen)
}

func (b *Backend) fenceArgs(ctx context.Context, resource string, token driver.Token) error {
	if b.err != nil {
		return b.err
	}
	if err := driver.CheckFenceArgs(resource, token); err != nil {
		return err
	}
	return ctx.Err()
}

func staleError(resource string, token driver.Token, seen int64) error {
	if seen == 0 {
		return nil
	}
	if seen < 0 || driver.Token(seen) <= token { // the script never says so
		return driver.Unavailable("fence", fmt.Errorf("unexpected fence reply %d for token %d", seen, token))
	}
	return &driver.StaleTokenError{Resource: resource, Token: token, Seen: driver.Token(seen)}
}

// hashTag returns the part of a key Redis Cluster hashes: the text between
// the first '{' and the next '}' if non-empty, else the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
