package mysqllock

// WithOwnHub gives a Backend an in-process wake-up hub of its own, so that
// it behaves as if it ran in another process: only polling wakes it.
func WithOwnHub(id string) Option { return func(c *config) { c.hubSuffix = "/" + id } }
