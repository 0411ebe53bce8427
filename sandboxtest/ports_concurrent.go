package sandboxtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// Ports/ConcurrentDownloadsAbandoned: many downloads through one endpoint
// at once, half of them dropped by the client midway. A relay that does
// not close both of its connections when one side goes away (the leak
// provider/local's TestExposeManyConnectionsLeaveNoDescriptors found)
// keeps a descriptor per abandoned download; one that mixes up or cuts
// streams under concurrency corrupts the complete ones. The relay lives in
// this process for provider/local, and the fakes' edges (e2bfake,
// daytonafake) serve from this process too, so the test counts this
// process's descriptors (a child process of the test binary of its own:
// see test.countsFDs).

func init() {
	portTests = append(portTests,
		test{name: "ConcurrentDownloadsAbandoned", needs: needsPorts, fn: testPortConcurrentDownloads, countsFDs: true},
	)
}

const (
	// concDownloads downloads in all, concParallel at a time, of a file of
	// concBlobSize bytes; every odd one is abandoned midway.
	concDownloads = 60
	concParallel  = 12
	concBlobSize  = 1 << 20
	// concFDSlack is how many more descriptors than before the downloads
	// the process may hold once they ended: room for a provider's
	// background work (a warm pool refilling, a keep-alive connection of a
	// fake's edge), well under the one per abandoned download a leak
	// leaves.
	concFDSlack = 8
	// concFDWait bounds the wait for the relays' connections to close
	// (they close asynchronously, after the client's side).
	concFDWait = 10 * time.Second
)

func testPortConcurrentDownloads(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	dir := sb.Home() + "/www"
	blob := make([]byte, concBlobSize)
	_, _ = rand.Read(blob)
	check(t, sb.WriteFile(ctx, dir+"/blob.bin", blob))
	ep, _ := startServer(ctx, t, s, sb, "exec python3 -m http.server PORT --bind 0.0.0.0 --directory "+dir)
	hc := s.portClient(t)
	d := &downloader{hc: hc, ep: ep, blob: blob, sum: sha256.Sum256(blob)}

	// One download first, so that what the provider sets up once (its
	// listener, a fake's transport) is counted before.
	if err := d.get(ctx, -1); err != nil {
		t.Fatalf("first download: %v", err)
	}
	hc.CloseIdleConnections()
	settled := fdsSettle(ctx, t, concFDWait, func(ctx context.Context) {
		d.batch(ctx, t)
		hc.CloseIdleConnections()
	})
	if !settled.checked() {
		t.Logf("descriptor check skipped: /proc/self/fd is not readable on %s", runtime.GOOS)
	} else if !settled.ok {
		t.Errorf("%d descriptors open %v after the downloads ended, %d before (slack %d), in two rounds: the endpoint's relay leaks connections (%s)",
			settled.after.total, concFDWait, settled.before.total, concFDSlack, settled)
	} else {
		t.Logf("descriptors: %s", settled)
	}

	// The endpoint still serves, byte-exact.
	if err := d.get(ctx, -1); err != nil {
		t.Fatalf("download after the others: %v", err)
	}
}

// batch runs the concDownloads downloads, concParallel at a time, and
// reports each failure.
func (d *downloader) batch(ctx context.Context, t *testing.T) {
	t.Helper()
	start := time.Now()
	errs := make([]error, concDownloads)
	sem := make(chan struct{}, concParallel)
	var wg sync.WaitGroup
loop:
	for i := range concDownloads {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			break loop
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = d.get(ctx, i)
		}()
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			if failed <= 10 {
				t.Errorf("download %d (abandoned midway: %v): %v", i, abandons(i), err)
			}
		}
	}
	if failed > 10 {
		t.Errorf("... %d downloads failed in all", failed)
	}
	t.Logf("%d downloads of %d bytes, %d at a time, %d abandoned midway: %v", concDownloads, concBlobSize, concParallel, concDownloads/2, time.Since(start).Round(time.Millisecond))
}

// abandons reports whether download i is dropped midway.
func abandons(i int) bool { return i%2 == 1 }

// downloader fetches /blob.bin through an endpoint and checks it.
type downloader struct {
	hc   *http.Client
	ep   sandbox.Endpoint
	blob []byte
	sum  [sha256.Size]byte
}

// get runs download i (-1: a complete one outside the batch). A complete
// download must match the blob's digest and length; an abandoned one reads
// a part (which must match the blob's start), then closes the body (i%4 ==
// 1) or cancels its request (i%4 == 3). Errors after the abandonment are
// the download's own doing and are not reported.
func (d *downloader) get(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := d.ep.NewRequest(ctx, http.MethodGet, "/blob.bin", nil)
	if err != nil {
		return fmt.Errorf("NewRequest: %w", err)
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d, body %q", resp.StatusCode, body)
	}
	if i >= 0 && abandons(i) {
		// Somewhere between 64 KiB and 320 KiB in, varying by download.
		n := 64<<10 + (i*7919)%(256<<10)
		part := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, part); err != nil {
			return fmt.Errorf("reading the first %d bytes: %w", n, err)
		}
		if !bytes.Equal(part, d.blob[:n]) {
			return fmt.Errorf("the first %d bytes differ from the file's", n)
		}
		if i%4 == 3 {
			cancel()
		}
		return nil // the deferred Close drops the connection midway
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return fmt.Errorf("read after %d bytes: %w", n, err)
	}
	if n != int64(len(d.blob)) || !bytes.Equal(h.Sum(nil), d.sum[:]) {
		return fmt.Errorf("got %d bytes whose SHA-256 differs from the %d-byte file's", n, len(d.blob))
	}
	return nil
}

// fdCount is the number of this process's open descriptors, and how many
// of each kind (socket, pipe, anon_inode, file).
type fdCount struct {
	total int
	kinds map[string]int
}

// openFDs counts this process's open descriptors from /proc/self/fd;
// false where that is not readable (not Linux).
func openFDs() (fdCount, bool) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fdCount{}, false
	}
	c := fdCount{kinds: map[string]int{}}
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed since the listing (the listing's own, too)
		}
		c.total++
		kind, _, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l, "/") {
			kind = "file"
		}
		c.kinds[kind]++
	}
	return c, true
}

// within reports whether c holds at most slack descriptors more than
// before, in all and of each kind: a relay's leaked sockets are not hidden
// by files a neighbour closed meanwhile.
func (c fdCount) within(before fdCount, slack int) bool {
	if c.total > before.total+slack {
		return false
	}
	for k, n := range c.kinds {
		if n > before.kinds[k]+slack {
			return false
		}
	}
	return true
}

// waitFDs polls openFDs until the count is within slack of before (see
// fdCount.within), for up to d (or until ctx ends), and returns the last
// count.
func waitFDs(ctx context.Context, before fdCount, slack int, d time.Duration) fdCount {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c, _ := openFDs()
		if c.within(before, slack) {
			return c
		}
		select {
		case <-ctx.Done():
			return c
		case <-tick.C:
		}
	}
}

// reporter is the part of *testing.T that fdsSettle uses.
type reporter interface {
	Helper()
	Logf(format string, args ...any)
	Failed() bool
}

// settled is what fdsSettle found: the counts of its last round, and how
// many rounds it ran.
type settled struct {
	ok            bool // the last round's count came back within the slack
	rounds        int  // none when /proc/self/fd could not be read
	before, after fdCount
	first         string // the first round's counts, when it did not settle
}

// checked reports whether the descriptors could be counted.
func (s settled) checked() bool { return s.rounds > 0 }

func (s settled) String() string {
	r := fmt.Sprintf("%d before, %d after (before: %v; after: %v)", s.before.total, s.after.total, s.before, s.after)
	if s.first != "" {
		r += "; first round: " + s.first
	}
	return r
}

// fdsSettle counts this process's descriptors, runs round, and waits up to
// wait for the count to come back to at most concFDSlack more than before,
// in all and of each kind (fdCount.within).
// The count is the whole process's, and the rest of the package (another
// configuration's subtests, a provider's own tests) opens and closes
// descriptors at the same time: when the count does not come back, the
// round runs once more, counted afresh. A relay that leaks leaks in both
// rounds; a neighbour seldom holds its descriptors across both.
func fdsSettle(ctx context.Context, t reporter, wait time.Duration, round func(ctx context.Context)) settled {
	t.Helper()
	var s settled
	for s.rounds < 2 && !t.Failed() {
		before, ok := openFDs()
		if !ok {
			return s
		}
		s.rounds++
		round(ctx)
		after := waitFDs(ctx, before, concFDSlack, wait)
		if s.rounds > 1 { // the first did not settle
			s.first = fmt.Sprintf("%d before, %d after", s.before.total, s.after.total)
		}
		s.before, s.after = before, after
		s.ok = after.within(before, concFDSlack)
		if s.ok {
			break
		}
		t.Logf("round %d: %d descriptors open %v after it, %d before (slack %d): counting another round, in case the rest of the process held them", s.rounds, after.total, wait, before.total, concFDSlack)
	}
	return s
}

// String lists the kinds in a stable order, e.g. "file=3 socket=12".
func (c fdCount) String() string {
	keys := make([]string, 0, len(c.kinds))
	for k := range c.kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, c.kinds[k])
	}
	return b.String()
}
