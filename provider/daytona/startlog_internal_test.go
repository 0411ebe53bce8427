package daytona

import (
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// A process just started is waited for in a list until it has been seen
// once, it ended, or startGrace passed; a process seen once is no longer
// waited for, so that a later list without it (it exited since) returns
// at once.
func TestStartLogWaitsUntilSeenEndedOrPastGrace(t *testing.T) {
	var l startLog
	running := &proc{pid: 7, done: make(chan struct{})}
	l.add("sb", running)
	if !l.missing("sb", nil) {
		t.Fatal("a process just started and not listed is not missing")
	}
	if l.missing("sb", []driver.ProcessInfo{{PID: 7}}) {
		t.Fatal("a listed process is missing")
	}
	if l.missing("sb", nil) {
		t.Error("a process seen in a list is still waited for")
	}

	ended := &proc{pid: 8, done: make(chan struct{})}
	l.add("sb", ended)
	close(ended.done)
	if l.missing("sb", nil) {
		t.Error("a process that ended is waited for")
	}

	old := &proc{pid: 9, done: make(chan struct{})}
	l.add("sb", old)
	l.mu.Lock()
	l.m["sb"][old] = time.Now().Add(-startGrace - time.Second)
	l.mu.Unlock()
	if l.missing("sb", nil) {
		t.Error("a process started longer than startGrace ago is waited for")
	}
	if len(l.m) != 0 {
		t.Errorf("entries left: %v", l.m)
	}
}
