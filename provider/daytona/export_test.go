package daytona

import "time"

// WithExecGraceForTest shortens ExecGrace for one Runtime, so that a test
// of a stalled connection sees the stall detected without waiting the
// full grace. The tests' only hook into it: the shipped grace stays
// ExecGrace.
func WithExecGraceForTest(d time.Duration) Option {
	return func(c *config) { c.grace = d }
}

// WithWatchIntervalForTest shortens WatchInterval for one Runtime (and
// the WatchLatency it reports), so that the watch conformance subtests
// see each change a poll sooner. The shipped interval stays WatchInterval.
func WithWatchIntervalForTest(d time.Duration) Option {
	return func(c *config) { c.watchEvery = d }
}
