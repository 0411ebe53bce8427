package fsbackend

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"io"
	"path"
	"sync"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/blobcache"
)

// blobSandbox gives internal/blobcache the two calls it makes on the
// sandbox (its ID, and a command run with stdin), so that the internal
// package does not depend on the user package.
type blobSandbox struct{ sb *sandbox.Sandbox }

func (s blobSandbox) ID() string { return s.sb.ID() }

func (s blobSandbox) Run(ctx context.Context, args []string, stdin io.Reader) (int, []byte, error) {
	res, err := s.sb.Exec(ctx, sandbox.Command{Args: args, Stdin: stdin, MaxOutput: 4096})
	if err != nil {
		return 0, nil, err
	}
	if !res.Success() && res.ExitCode == 0 {
		return -1, res.Stderr, nil // ended by a timeout
	}
	return res.ExitCode, res.Stderr, nil
}

// The in-sandbox helper (internal/fshelper), built for each architecture
// below by the go generate step and embedded compressed; helperbin/SHA256SUMS
// holds the uncompressed binaries' sums and the Go release that built them.
//
//go:generate go run ./internal/fshelper/gen -o helperbin -src ./internal/fshelper
//go:embed helperbin/fshelper-linux-amd64.gz helperbin/fshelper-linux-arm64.gz helperbin/SHA256SUMS
var helperFiles embed.FS

// helperArches are the architectures with a helper, by the name the
// wrapper reports (from uname -m).
var helperArches = []string{"amd64", "arm64"}

// helperBlob returns the helper for arch, decompressed once.
var helperBlob = sync.OnceValue(func() map[string]*blobcache.Blob {
	blobs := map[string]*blobcache.Blob{}
	for _, arch := range helperArches {
		gz, err := helperFiles.ReadFile("helperbin/fshelper-linux-" + arch + ".gz")
		if err != nil {
			continue
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			continue
		}
		data, err := io.ReadAll(zr)
		if err != nil {
			continue
		}
		blobs[arch] = blobcache.New("fshelper-linux-"+arch, data)
	}
	return blobs
})

// helperDir is where the helper is put in the sandbox: under the
// workspace's metadata directory, which no file tool reaches through any
// alias, on the workspace's own file system (under the sandbox user's
// home by default, where /tmp may be noexec).
func helperDir(base string) string { return path.Join(base, MetadataDir, "bin") }

// helperWrapper runs before opScript: it runs the helper when it is there
// and executable and ends with its exit code; otherwise it reports why
// (helper=missing, or helper=noexec when the file system refused to run
// it) and lets opScript do the operation, stdin untouched. With
// SBX_HELPER_PROBE it first reports the machine (arch=amd64|arm64|other)
// and picks that architecture's helper.
const helperWrapper = `h=${SBX_HELPER:-}
if [ -n "${SBX_HELPER_PROBE:-}" ]; then
  case $(uname -m 2>/dev/null) in
  x86_64|amd64) printf 'arch=amd64\0' >&2; h=${SBX_HELPER_AMD64:-} ;;
  aarch64|arm64) printf 'arch=arm64\0' >&2; h=${SBX_HELPER_ARM64:-} ;;
  *) printf 'arch=other\0' >&2; h= ;;
  esac
fi
if [ -n "$h" ]; then
  if [ -f "$h" ] && [ -x "$h" ]; then
    "$h"; c=$?
    # The shell's complaint precedes: a NUL ends it as a record.
    case $c in 126|127) printf '\0helper=noexec\0' >&2 ;; *) exit "$c" ;; esac
  else
    printf 'helper=missing\0' >&2
  fi
fi
`

// helper states.
const (
	helperUnknown = iota // the first call probes the machine
	helperReady          // helperPath is set
	helperOff            // the shell path only
)

// maxHelperUploads bounds the uploads of one backend: a helper that keeps
// vanishing (removed by a command) is put back a few times, then the
// backend keeps to the shell path.
const maxHelperUploads = 3

// helperEnv adds the helper's variables to a run's environment and
// returns the helper generation the run starts from (see afterRun).
func (b *FilesystemBackend) helperEnv(base string, e map[string]string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	gen := b.helperGen
	switch b.helperState {
	case helperReady:
		if b.helperBase == base {
			e["SBX_HELPER"] = b.helperPath
			return gen
		}
		fallthrough
	case helperUnknown:
		e["SBX_HELPER_PROBE"] = "1"
		for arch, blob := range helperBlob() {
			switch arch {
			case "amd64":
				e["SBX_HELPER_AMD64"] = blob.Path(helperDir(base))
			case "arm64":
				e["SBX_HELPER_ARM64"] = blob.Path(helperDir(base))
			}
		}
	}
	return gen
}

// afterRun learns from a run's records whether the helper ran, and puts
// it in the sandbox when the run said it is missing: once per sandbox,
// so the calls after the first take their usual one round trip.
// gen is the generation the run started from: a run that found the helper
// missing before another call put it there changes nothing.
func (b *FilesystemBackend) afterRun(ctx context.Context, base string, gen int, r *opResult) {
	ran := r.get("helper")
	if ran != "" && ran != "missing" && ran != "noexec" {
		b.helperRuns.Add(1)
	}
	b.mu.Lock()
	if arch := r.get("arch"); arch != "" {
		b.arch = arch
		if helperBlob()[arch] == nil {
			b.helperState = helperOff
		}
	}
	switch {
	case ran == "noexec":
		b.helperState = helperOff
		b.mu.Unlock()
		b.opts.Logger.Warn("fsbackend: the sandbox cannot run the file helper (noexec file system?); using the shell path")
		return
	case ran != "missing" || b.helperState == helperOff || r.code == exitReplaced || gen != b.helperGen:
		if ran != "" && ran != "missing" && b.helperState == helperUnknown {
			// Found from an earlier upload (another backend instance).
			if blob := helperBlob()[b.arch]; blob != nil {
				b.helperState, b.helperPath, b.helperBase = helperReady, blob.Path(helperDir(base)), base
			}
		}
		b.mu.Unlock()
		return
	}
	blob := helperBlob()[b.arch]
	if blob == nil || b.helperUploads >= maxHelperUploads {
		b.helperState = helperOff
		b.mu.Unlock()
		return
	}
	b.helperUploads++
	vanished := b.helperState == helperReady // it was there, then removed
	b.mu.Unlock()
	if vanished {
		blobcache.Default.Forget(b.sb.ID(), blob.Path(helperDir(base)))
	}
	p, err := blobcache.Default.Ensure(ctx, blobSandbox{b.sb}, helperDir(base), blob)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.opts.Logger.Warn("fsbackend: cannot put the file helper in the sandbox; using the shell path", "err", err)
		if ctx.Err() == nil {
			b.helperState = helperOff
		}
		return
	}
	if gen == b.helperGen {
		b.helperState, b.helperPath, b.helperBase = helperReady, p, base
		b.helperGen++
	}
}
