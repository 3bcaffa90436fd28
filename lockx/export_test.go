package lockx

// WatchdogKicks is how often c's watchdog loop was woken early by a new
// lock or a finished renewal.
func WatchdogKicks(c *Client) int64 { return c.wd.kicks.Load() }
