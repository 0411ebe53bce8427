// Package watchq is the bounded event queue between a provider's watcher
// (which must never block on its consumer: inotify's queue, a stream from
// a daemon, a poller) and the consumer of a driver.Watcher's sequence.
// It holds at most the configured number of events; an event that does not
// fit replaces everything queued with one FileOverflow event, so a slow
// consumer costs bounded memory and learns that it must rescan.
package watchq

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

// Queue is a bounded, single-consumer queue of file events.
type Queue struct {
	dir  string
	max  int
	stop func()

	ended chan struct{} // closed when the producer Go started returns

	mu       sync.Mutex
	buf      []driver.FileEvent
	err      error
	done     bool
	notify   chan struct{} // closed and replaced when something changes
	overflow int           // overflow events produced, for tests and metrics
}

// New returns a queue for a watch of dir holding at most max events
// (max < 1 counts as 1). stop, when non-nil, is called once when the
// consumer's sequence ends (its ctx ended, it broke out, or the watch
// failed) to end the producer.
func New(dir string, max int, stop func()) *Queue {
	if max < 1 {
		max = 1
	}
	return &Queue{dir: dir, max: max, stop: stop, notify: make(chan struct{})}
}

func (q *Queue) wake() {
	close(q.notify)
	q.notify = make(chan struct{})
}

// Push queues ev without blocking. When the queue is full, what it holds
// is dropped and replaced by one FileOverflow event for the watched
// directory (ev is dropped too: the consumer must rescan anyway). A queue
// whose head is already an overflow event with nothing after it absorbs
// further overflows.
func (q *Queue) Push(ev driver.FileEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return
	}
	if ev.Kind == driver.FileOverflow {
		q.pushOverflow(ev.Time)
		return
	}
	if len(q.buf) >= q.max {
		q.pushOverflow(time.Now())
		return
	}
	q.buf = append(q.buf, ev)
	q.wake()
}

func (q *Queue) pushOverflow(t time.Time) {
	if n := len(q.buf); n > 0 && q.buf[n-1].Kind == driver.FileOverflow {
		return // the consumer has not yet seen the last overflow: one is enough
	}
	if len(q.buf) >= q.max {
		q.buf = q.buf[:0]
	}
	if len(q.buf) == 0 && cap(q.buf) > 4*q.max {
		q.buf = nil // let a large backing array go
	}
	q.buf = append(q.buf, driver.FileEvent{Path: q.dir, Kind: driver.FileOverflow, IsDir: true, Time: t})
	q.overflow++
	q.wake()
}

// Fail ends the queue with err: the consumer gets the events still queued,
// then err. A nil err ends it without one. Later calls do nothing.
func (q *Queue) Fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return
	}
	q.done, q.err = true, err
	q.wake()
}

// Overflows reports how many overflow events the queue produced.
func (q *Queue) Overflows() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.overflow
}

// Seq returns the consumer's sequence: events until ctx ends (then it
// stops without an error), the queue fails (it yields the error, if any,
// and stops) or the consumer breaks out. The producer's stop func runs
// when it ends. Seq is meant to be ranged over once.
func (q *Queue) Seq(ctx context.Context) iter.Seq2[driver.FileEvent, error] {
	return func(yield func(driver.FileEvent, error) bool) {
		defer q.close()
		for {
			if ctx.Err() != nil {
				return
			}
			q.mu.Lock()
			if len(q.buf) > 0 {
				ev := q.buf[0]
				q.buf[0] = driver.FileEvent{}
				q.buf = q.buf[1:]
				q.mu.Unlock()
				if !yield(ev, nil) {
					return
				}
				continue
			}
			if q.done {
				err := q.err
				q.mu.Unlock()
				if err != nil && ctx.Err() == nil {
					yield(driver.FileEvent{}, err)
				}
				return
			}
			ch := q.notify
			q.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
		}
	}
}

// close marks the queue done and stops the producer once, then waits
// (at most producerWait) for a producer started with Go to return.
func (q *Queue) close() {
	q.mu.Lock()
	q.done = true
	q.buf = nil
	stop := q.stop
	q.stop = nil
	q.mu.Unlock()
	if stop != nil {
		stop()
	}
	if q.ended != nil {
		t := time.NewTimer(producerWait)
		defer t.Stop()
		select {
		case <-q.ended:
		case <-t.C:
		}
	}
}

// producerWait bounds how long the end of a consumer's sequence waits for
// the producer to return once stopped. A producer's calls end with the
// context or the connection stop ends, so it returns at once but for a
// provider that does not honour them.
var producerWait = 10 * time.Second

// Go runs the producer on a goroutine of its own, once, before Seq is
// handed out: when the consumer's sequence ends, it stops the producer and
// waits for fn to return, so that no goroutine of the watch outlives the
// consumer's loop (one still listing a directory when the loop ended was
// seen by a goroutine-leak check under load).
func (q *Queue) Go(fn func()) {
	q.ended = make(chan struct{})
	go func() {
		defer close(q.ended)
		fn()
	}()
}

// Close ends the queue from the producer's side without an error and
// without waiting for the consumer.
func (q *Queue) Close() { q.Fail(nil) }
