package redislock

// Watching reports whether some watcher of key is registered on b.
func Watching(b *Backend, key string) bool {
	b.n.mu.Lock()
	defer b.n.mu.Unlock()
	return b.n.watchers.Len(b.lockKey(key)) > 0
}
