package e2b

import "time"

// WithExecGraceForTest shortens ExecGrace for one Runtime, so that a test
// of a stalled stream sees the stall detected without waiting the full
// grace. The tests' only hook into it: the shipped grace stays ExecGrace.
func WithExecGraceForTest(d time.Duration) Option {
	return func(c *config) { c.grace = d }
}
