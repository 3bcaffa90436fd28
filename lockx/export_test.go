package lockx

import "time"

// WatchdogKicks is how often c's watchdog loop was woken early by a new
// lock or a finished renewal.
func WatchdogKicks(c *Client) int64 { return c.wd.kicks.Load() }

// WatchdogStarts is how many times c's watchdog goroutine was started.
func WatchdogStarts(c *Client) int64 { return c.wd.starts.Load() }

// SetWatchdogLinger sets how long c's watchdog goroutine outlives the last
// lock it renews.
func SetWatchdogLinger(c *Client, d time.Duration) {
	c.wd.mu.Lock()
	c.wd.linger = d
	c.wd.mu.Unlock()
}

// WatchdogRunning reports whether c's watchdog goroutine runs.
func WatchdogRunning(c *Client) bool {
	c.wd.mu.Lock()
	defer c.wd.mu.Unlock()
	return c.wd.running
}

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
