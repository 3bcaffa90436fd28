package etcdlock

// PrefixOf returns b's key prefix (tests).
func PrefixOf(b *Backend) string { return b.cfg.prefix }
