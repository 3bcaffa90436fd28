package redislock

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/redis/go-redis/v9"
)

var _ driver.Inspector = (*Backend)(nil)

// scanCount is the COUNT hint of each SCAN step, and the size of the
// pipelines that read what it found.
const scanCount = 500

// Locks implements driver.Inspector with SCAN over every primary (all of a
// Cluster's masters), then one pipeline per SCAN page reading each lock's
// value, PTTL and queue sizes. Age is 0: Redis keeps only the lease.
// Waiters counts the fair queue plus, for plain waiters, the number of
// backends waiting (at least one waiter each), so it is a lower bound.
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	if b.err != nil {
		return b.err
	}
	patterns := []string{b.cfg.prefix + "{" + globEscape(prefix) + "*"}
	if prefix == "" || prefix[0] == '}' {
		patterns = append(patterns, b.cfg.prefix+"#{#}"+globEscape(prefix)+"*")
	}
	stop := errors.New("stop")
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		for _, pat := range patterns {
			var cursor uint64
			for {
				names, next, err := node.Scan(ctx, cursor, pat, scanCount).Result()
				if err != nil {
					return driver.Unavailable("locks", err)
				}
				infos, err := b.read(ctx, "locks", node, names)
				if err != nil {
					return err
				}
				for _, li := range infos {
					if !strings.HasPrefix(li.Key, prefix) {
						continue
					}
					if !fn(li) {
						return stop
					}
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		return nil
	}
	var err error
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		// ForEachMaster runs nodes concurrently; fn is documented as called
		// one at a time, so the scans are serialised through a channel of
		// one token.
		turn := make(chan struct{}, 1)
		turn <- struct{}{}
		stopped := false // guarded by turn
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			select {
			case <-turn:
			case <-ctx.Done():
				return ctx.Err()
			}
			defer func() { turn <- struct{}{} }()
			if stopped {
				return stop
			}
			err := scan(ctx, node)
			stopped = errors.Is(err, stop)
			return err
		})
	} else {
		err = scan(ctx, b.rdb)
	}
	if errors.Is(err, stop) {
		return nil
	}
	return err
}

// Lock implements driver.Inspector.
func (b *Backend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	if b.err != nil {
		return driver.LockInfo{}, b.err
	}
	infos, err := b.read(ctx, "lock", b.rdb, []string{b.lockKey(key)})
	if err != nil {
		return driver.LockInfo{}, err
	}
	if len(infos) == 0 {
		return driver.LockInfo{}, driver.ErrNotHeld
	}
	return infos[0], nil
}

// read returns the held locks among the key names (other names, queues
// and tombstones are skipped). op names the Inspector method in errors.
func (b *Backend) read(ctx context.Context, op string, node redis.UniversalClient, names []string) ([]driver.LockInfo, error) {
	type cand struct {
		key          string
		get          *redis.StringCmd
		pttl         *redis.DurationCmd
		queue, marks *redis.IntCmd
	}
	cands := make([]cand, 0, len(names))
	for _, n := range names {
		key, ok := b.userKey(n)
		if !ok {
			continue
		}
		cands = append(cands, cand{key: key})
	}
	if len(cands) == 0 {
		return nil, nil
	}
	_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cands {
			c := &cands[i]
			lk, q, _, w := b.keys(c.key)
			c.get, c.pttl = p.Get(ctx, lk), p.PTTL(ctx, lk)
			c.queue, c.marks = p.ZCard(ctx, q), p.SCard(ctx, w)
		}
		return nil
	})
	if err != nil && !isVerdict(err) {
		return nil, driver.Unavailable(op, err)
	}
	var out []driver.LockInfo
	for _, c := range cands {
		v, err := c.get.Result()
		if err != nil || len(v) <= 8 { // gone, not a string, or a tombstone
			continue
		}
		ttl, _ := c.pttl.Result()
		q, _ := c.queue.Result()
		m, _ := c.marks.Result()
		out = append(out, driver.LockInfo{
			Key:     c.key,
			Owner:   decodeOwner(v[:len(v)-8]),
			Token:   driver.Token(binary.BigEndian.Uint64([]byte(v[len(v)-8:]))),
			TTL:     max(ttl, 0),
			Waiters: int(q + m),
		})
	}
	return out, nil
}

// isVerdict: a pipeline's first error that is an answer about one key
// (missing, wrong type), not a failure of the connection.
func isVerdict(err error) bool {
	return errors.Is(err, redis.Nil) || strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// userKey returns the user key whose lock is named n, or false if n names
// something else (a queue, another pattern's key).
func (b *Backend) userKey(n string) (string, bool) {
	p := b.cfg.prefix
	if !strings.HasPrefix(n, p) {
		return "", false
	}
	rest := n[len(p):]
	switch {
	case strings.HasPrefix(rest, "#{#}"):
		// "<prefix>#{#}<key>": a queue name is a lock name plus a suffix,
		// so such names are ambiguous here; read tells them apart by
		// type (GET fails on a queue).
		return rest[len("#{#}"):], true
	case strings.HasPrefix(rest, "{") && strings.HasSuffix(rest, "}") && len(rest) >= 2:
		return rest[1 : len(rest)-1], true
	}
	return "", false
}

// globEscape quotes the glob metacharacters of a SCAN pattern.
func globEscape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			sb.WriteByte('\\')
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}
