package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
)

// Upload streams r into the file at path (relative paths start at the
// home), creating parent directories and replacing an existing file
// atomically: the bytes go to a temporary file next to it (a hidden name
// ending in ".sbx.tmp") that replaces it after the last byte. When the
// upload fails (r fails, ctx ends, the transport breaks) the file at path
// is left as it was and the temporary file is removed. When r's Read
// fails, the error wraps r's error (errors.Is matches it) and has its Code
// ([CodeOf]; Unknown for an error of your own), on every provider. r is
// read once; Upload is retried after a stale transport only if nothing had
// been read from r yet. Upload waits for a Read in progress, so r's reads
// must end when ctx does.
func (s *Sandbox) Upload(ctx context.Context, path string, r io.Reader) (err error) {
	const op = "upload"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	var cr *iox.CountingReader
	defer func() {
		if cr != nil {
			s.c.tel.transfer(ctx, tc.span, true, cr.N)
		}
		tc.end(ctx, err)
	}()
	if r == nil {
		return invalid(op, s.c.rt.Name(), s.id, "reader", "nil io.Reader for %q", printable(path))
	}
	abs, err := s.path(op, "path", path)
	if err != nil {
		return err
	}
	// Without a ctx deadline the transfer is bounded by its progress: it
	// ends when the provider takes no bytes for CallTimeouts.Idle.
	bctx, touch, stop := idleBound(ctx, op, s.c.calls.Idle)
	cr = &iox.CountingReader{R: touchReader{r, touch}}
	err = s.c.retry(bctx, op, true, func() bool { return cr.N == 0 && cr.Err == nil }, func() error {
		return s.c.rt.Upload(bctx, s.id, abs, cr)
	})
	err = explain(ctx, bctx, err)
	stop()
	if err != nil && cr.Err != nil {
		// The caller's reader failed: whatever the driver made of it, the
		// cause is the reader's error.
		return &Error{Op: op, Provider: s.c.rt.Name(), SandboxID: s.id, Path: abs, Code: CodeOf(cr.Err),
			Err: fmt.Errorf("reading the source: %w", redactErr(cr.Err, s.secrets))}
	}
	return s.wrap(op, abs, err)
}

// touchReader calls touch after each Read: progress for an idle bound.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (t touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.touch()
	return n, err
}

// touchWriter calls touch after each Write.
type touchWriter struct {
	w     io.Writer
	touch func()
}

func (t touchWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.touch()
	return n, err
}

// Download opens the file at path for streaming. Close the reader.
//
// The call's span lasts until the reader is closed, and records the bytes
// read.
func (s *Sandbox) Download(ctx context.Context, path string) (_ io.ReadCloser, err error) {
	const op = "download"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() {
		if err != nil {
			tc.end(ctx, err)
		}
	}()
	abs, err := s.path(op, "path", path)
	if err != nil {
		return nil, err
	}
	// Without a ctx deadline the stream is bounded by its progress: it
	// ends when no bytes arrive for CallTimeouts.Idle, however long the
	// whole transfer takes.
	bctx, touch, stop := idleBound(ctx, op, s.c.calls.Idle)
	var rc io.ReadCloser
	err = s.c.retry(bctx, op, true, nil, func() error {
		var err error
		rc, err = s.c.rt.Download(bctx, s.id, abs)
		return err
	})
	if err != nil {
		err = explain(ctx, bctx, err)
		stop()
		return nil, s.wrap(op, abs, err)
	}
	touch()
	return &wrappedReader{rc: rc, s: s, path: abs, ctx: ctx, bctx: bctx, touch: touch, stop: stop, tc: tc}, nil
}

// wrappedReader wraps read errors (other than io.EOF) into *Error and
// keeps the stream's idle bound alive while bytes arrive.
//
// Close may be called from another goroutine while a Read or WriteTo is
// copying (the usual way to abort a stream), and more than once: the
// byte count and first error are kept under mu, the stream is closed
// once, and the download's span ends exactly once, when the stream is
// closed and no Read or WriteTo is still running, so it records every
// byte that was delivered.
type wrappedReader struct {
	rc        io.ReadCloser
	s         *Sandbox
	path      string
	ctx, bctx context.Context
	touch     func()
	stop      func()
	tc        call // the download's span, ended once the stream is closed and idle

	closeOnce sync.Once
	closeErr  error // what the first Close of rc returned
	endOnce   sync.Once

	mu     sync.Mutex
	n      int64 // bytes read
	rerr   error // the first read error other than io.EOF
	active int   // Read and WriteTo calls still running
	closed bool
}

// begin marks a Read or WriteTo as running.
func (w *wrappedReader) begin() {
	w.mu.Lock()
	w.active++
	w.mu.Unlock()
}

// finish records what a Read or WriteTo delivered and ends the span when
// the stream was closed meanwhile and nothing else is still copying.
func (w *wrappedReader) finish(n int64, err error) {
	w.mu.Lock()
	w.n += n
	if err != nil && w.rerr == nil {
		w.rerr = err
	}
	w.active--
	end := w.closed && w.active == 0
	w.mu.Unlock()
	if end {
		w.endSpan()
	}
}

// endSpan records the transfer and ends the download's span, once.
func (w *wrappedReader) endSpan() {
	w.endOnce.Do(func() {
		w.mu.Lock()
		n, rerr := w.n, w.rerr
		w.mu.Unlock()
		w.s.c.tel.transfer(w.ctx, w.tc.span, false, n)
		w.tc.end(w.ctx, rerr)
	})
}

func (w *wrappedReader) Read(p []byte) (int, error) {
	w.begin()
	n, err := w.rc.Read(p)
	if n > 0 {
		w.touch()
	}
	if err != nil && err != io.EOF {
		err = w.s.wrap("download", w.path, explain(w.ctx, w.bctx, err))
		w.finish(int64(n), err)
		return n, err
	}
	w.finish(int64(n), nil)
	return n, err
}

// Close closes the stream and releases its idle bound; the download's
// span ends now, or when a Read or WriteTo still running returns. Later
// calls return what the first one did.
func (w *wrappedReader) Close() error {
	w.closeOnce.Do(func() {
		w.closeErr = w.rc.Close()
		w.stop()
	})
	w.mu.Lock()
	w.closed = true
	end := w.active == 0
	w.mu.Unlock()
	if end {
		w.endSpan()
	}
	return w.closeErr
}

// WriteTo streams the file to dst, letting io.Copy use the driver's fast
// path when it has one.
func (w *wrappedReader) WriteTo(dst io.Writer) (int64, error) {
	w.begin()
	n, err := io.Copy(touchWriter{dst, w.touch}, w.rc)
	if err != nil {
		err = w.s.wrap("download", w.path, explain(w.ctx, w.bctx, err))
	}
	w.finish(n, err)
	return n, err
}

// DefaultMaxReadFile is the largest file Sandbox.ReadFile reads unless
// the Client was opened WithMaxReadFile.
const DefaultMaxReadFile = 10 << 20

// ReadFile returns the whole content of the file at path. A file larger
// than the Client's read cap (DefaultMaxReadFile unless WithMaxReadFile
// says otherwise) is refused with an error matching ErrLimit
// (ResourceExhausted) that names its size: the size is checked with Stat
// before the transfer and again while reading, so a file that grows in
// between is cut off at the cap rather than read whole. Use Download to
// stream a file of any size.
func (s *Sandbox) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return s.ReadFileLimit(ctx, path, s.c.maxRead)
}

// ReadFileLimit is ReadFile with its own cap of limit bytes; a limit of
// zero or less reads the whole file, however large.
func (s *Sandbox) ReadFileLimit(ctx context.Context, path string, limit int64) (_ []byte, err error) {
	const op = "download"
	ctx, tc := s.c.tel.start(ctx, "read-file", s.id)
	defer func() { tc.end(ctx, err) }()
	abs, err := s.path(op, "path", path)
	if err != nil {
		return nil, err
	}
	if limit > 0 {
		fi, err := s.stat(ctx, op, abs)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() && fi.Size > limit {
			return nil, s.wrap(op, abs, tooLarge(fi.Size, limit, false))
		}
	}
	rc, err := s.Download(ctx, abs)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var b bytes.Buffer
	var r io.Reader = rc
	if limit > 0 {
		r = io.LimitReader(rc, limit+1)
	}
	if _, err := b.ReadFrom(r); err != nil {
		return nil, err
	}
	if limit > 0 && int64(b.Len()) > limit {
		return nil, s.wrap(op, abs, tooLarge(int64(b.Len()), limit, true))
	}
	return b.Bytes(), nil
}

// tooLarge reports a file over a read cap; atLeast says the size is a
// lower bound (the file grew past the cap while it was read).
func tooLarge(size, limit int64, atLeast bool) error {
	more := ""
	if atLeast {
		more = "at least "
	}
	return fmt.Errorf("file is %s%d bytes, over the read cap of %d bytes; stream it with Download: %w", more, size, limit, ErrLimit)
}

// WriteFile writes data to the file at path, creating parents.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte) error {
	if data == nil {
		data = []byte{}
	}
	return s.Upload(ctx, path, bytes.NewReader(data))
}

// File is one file of a WriteFiles batch.
type File struct {
	Path string
	Data []byte
}

// WriteFiles writes a batch of files, a few at a time, creating parents.
// A failure does not stop the others. The error is nil when every file was
// written; otherwise it joins (errors.Join) one error per failed file, in
// input order, each an *Error that names its path, so a single check
// covers the batch, errors.Is and CodeOf see each failure's code, and the
// Unwrap() []error of the joined error lists which files failed.
func (s *Sandbox) WriteFiles(ctx context.Context, files []File) (err error) {
	ctx, tc := s.c.tel.start(ctx, "write-files", s.id)
	defer func() { tc.end(ctx, err) }()
	return errors.Join(s.writeFiles(ctx, files)...)
}

// writeFiles writes files and returns one error (nil on success) per file.
func (s *Sandbox) writeFiles(ctx context.Context, files []File) []error {
	errs := make([]error, len(files))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = s.WriteFile(ctx, f.Path, f.Data)
		}()
	}
	wg.Wait()
	return errs
}

// VerifyOptions configures WriteFilesVerified.
type VerifyOptions struct {
	// SHA256 also reads each file back and compares its SHA-256 with the
	// data written (one download per file), not only its size.
	SHA256 bool
}

// WriteFilesVerified writes a batch of files like WriteFiles, then checks
// that each one the sandbox accepted is there as written: a regular file
// of the written size (and, with opts.SHA256, the same SHA-256). A file
// that does not match gets an Internal error naming what the sandbox has
// and what was written. The failures are joined as by WriteFiles. It
// checks each file with its own calls; WriteBundle checks a whole set, with
// a manifest, in one command.
func (s *Sandbox) WriteFilesVerified(ctx context.Context, files []File, opts VerifyOptions) (err error) {
	ctx, tc := s.c.tel.start(ctx, "write-files-verified", s.id)
	defer func() { tc.end(ctx, err) }()
	errs := s.writeFiles(ctx, files)
	for i, f := range files {
		if errs[i] == nil {
			errs[i] = s.verify(ctx, f, opts)
		}
	}
	return errors.Join(errs...)
}

// verify checks one written file against its data.
func (s *Sandbox) verify(ctx context.Context, f File, opts VerifyOptions) error {
	const op = "verify"
	abs, err := s.path(op, "path", f.Path)
	if err != nil {
		return err
	}
	fi, err := s.stat(ctx, op, abs)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Size != int64(len(f.Data)) {
		return s.wrap(op, abs, Errorf(Internal, "sandbox: write not verified: the sandbox has %d bytes (directory: %t), %d were written",
			fi.Size, fi.IsDir(), len(f.Data)))
	}
	if !opts.SHA256 {
		return nil
	}
	rc, err := s.Download(ctx, abs)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return err
	}
	want := sha256.Sum256(f.Data)
	if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
		return s.wrap(op, abs, Errorf(Internal, "sandbox: write not verified: SHA-256 %x in the sandbox, %x written", got, want))
	}
	return nil
}

// Stat describes the file at path.
func (s *Sandbox) Stat(ctx context.Context, path string) (_ FileInfo, err error) {
	const op = "stat"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	abs, err := s.path(op, "path", path)
	if err != nil {
		return FileInfo{}, err
	}
	return s.stat(ctx, op, abs)
}

// stat is Stat of a resolved path, reporting failures as op.
func (s *Sandbox) stat(ctx context.Context, op, abs string) (FileInfo, error) {
	var fi driver.FileInfo
	err := s.c.retry(ctx, op, true, nil, func() error {
		var err error
		fi, err = s.c.rt.Stat(ctx, s.id, abs)
		return err
	})
	return fileInfoOf(fi), s.wrap(op, abs, err)
}

// ReadDir lists the directory at path, sorted by name.
func (s *Sandbox) ReadDir(ctx context.Context, path string) (_ []FileInfo, err error) {
	const op = "readdir"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	abs, err := s.path(op, "path", path)
	if err != nil {
		return nil, err
	}
	var list []driver.FileInfo
	err = s.c.retry(ctx, op, true, nil, func() error {
		var err error
		list, err = s.c.rt.ReadDir(ctx, s.id, abs)
		return err
	})
	if err != nil {
		return nil, s.wrap(op, abs, err)
	}
	out := make([]FileInfo, len(list))
	for i, fi := range list {
		out[i] = fileInfoOf(fi)
	}
	return out, nil
}

// MkdirAll creates the directory at path and its missing parents.
func (s *Sandbox) MkdirAll(ctx context.Context, path string) (err error) {
	const op = "mkdir"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	abs, err := s.path(op, "path", path)
	if err != nil {
		return err
	}
	return s.wrap(op, abs, s.c.retry(ctx, op, true, nil, func() error { return s.c.rt.MkdirAll(ctx, s.id, abs) }))
}

// Remove removes the file or directory tree at path. A missing path is an
// error matching ErrNotFound and fs.ErrNotExist.
func (s *Sandbox) Remove(ctx context.Context, path string) (err error) {
	const op = "remove"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	abs, err := s.path(op, "path", path)
	if err != nil {
		return err
	}
	if abs == "/" || abs == s.Home() {
		return invalid(op, s.c.rt.Name(), s.id, "path", "refusing to remove %q", abs)
	}
	return s.wrap(op, abs, s.c.retry(ctx, op, false, nil, func() error { return s.c.rt.Remove(ctx, s.id, abs) }))
}

// Rename moves oldPath to newPath. A newPath inside oldPath (after both
// are resolved and cleaned: "a" to "a/b", or "a/./b") is refused with
// InvalidArgument on every provider, as rename(2) refuses to move a
// directory into itself (and a file has nothing inside it); a symbolic
// link among newPath's parents that leads into oldPath is caught by the
// provider, with the same code.
//
// A rename of a path onto itself (the same path after cleaning: "dir" and
// "dir/", or an absolute and a relative spelling) changes nothing and
// returns nil when the path exists, and NotFound when it does not, as
// rename(2) does, on every provider alike; the provider is not asked to
// rename, only to stat the path.
func (s *Sandbox) Rename(ctx context.Context, oldPath, newPath string) (err error) {
	const op = "rename"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	from, err := s.path(op, "old path", oldPath)
	if err != nil {
		return err
	}
	to, err := s.path(op, "new path", newPath)
	if err != nil {
		return err
	}
	if to == from {
		_, err := s.stat(ctx, op, from)
		return err
	}
	if pathsafe.Within(from, to) {
		return invalid(op, s.c.rt.Name(), s.id, "new path", "%s is inside the old path %s: a directory cannot be moved into itself",
			shortPath(to), shortPath(from))
	}
	return s.wrap(op, from, s.c.retry(ctx, op, false, nil, func() error { return s.c.rt.Rename(ctx, s.id, from, to) }))
}
