package lockx

// WatchdogKicks is how often c's watchdog loop was woken early by a new
// lock or a finished renewal.
func WatchdogKicks(c *Client) int64 { return c.wd.kicks.Load() }

// WatchdogAsleep reports whether c's watchdog loop has scheduled its next
// wake-up and waits for it.
func WatchdogAsleep(c *Client) bool {
	c.wd.mu.Lock()
	defer c.wd.mu.Unlock()
	return !c.wd.wakeAt.IsZero()
}

// GateQueue is how many callers wait at key's LocalFirst gate on c.
func GateQueue(c *Client, key string) int {
	c.gates.mu.Lock()
	defer c.gates.mu.Unlock()
	if g := c.gates.m[key]; g != nil {
		return len(g.queue)
	}
	return 0
}

// MaxLocalPasses is maxLocalPasses.
const MaxLocalPasses = maxLocalPasses
