package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultManifestPath is where WriteBundle writes a bundle's manifest when
// BundleOptions.ManifestPath is empty, relative to the sandbox's home
// (like every relative path): $HOME/.sandboxkit/bundle-manifest.json. Give
// each bundle its own ManifestPath when one sandbox holds several.
const DefaultManifestPath = ".sandboxkit/bundle-manifest.json"

// ManifestVersion is the Version of the manifests WriteBundle writes.
const ManifestVersion = 1

// Manifest describes a bundle of files as written to a sandbox: each
// file's absolute path, size and SHA-256. WriteBundle writes it into the
// sandbox as JSON ({"version":1,"files":[{"path":...,"size":...,
// "sha256":...}]}), so that code in the sandbox can check what it was
// given, and VerifyManifest checks the sandbox's files against it.
type Manifest struct {
	// Version is ManifestVersion.
	Version int `json:"version"`
	// Files are the bundle's files, in the order given to WriteBundle.
	Files []ManifestEntry `json:"files"`
}

// ManifestEntry is one file of a Manifest.
type ManifestEntry struct {
	// Path is the file's absolute path in the sandbox.
	Path string `json:"path"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lower-case hex SHA-256 of the file's content.
	SHA256 string `json:"sha256"`
}

// BundleOptions configures WriteBundle.
type BundleOptions struct {
	// ManifestPath is where the manifest is written in the sandbox
	// (DefaultManifestPath when empty; relative paths start at the home).
	// It must not be one of the bundle's files.
	ManifestPath string
}

// WriteBundle uploads files as one bundle, with a manifest of their paths,
// sizes and SHA-256 written next to them at opts.ManifestPath, and then
// checks inside the sandbox that every file, the manifest included, is
// there as the manifest says: one verification command (VerifyManifest)
// after the uploads, not a download or a stat per file, so a bundle costs
// one round trip more than its uploads however many files it holds. This
// catches a transfer the provider acknowledged but did not deliver whole,
// before code in the sandbox runs on a damaged or missing input.
//
// It returns the manifest (without its own entry) and, joined
// (errors.Join) in input order with the manifest's last, one error per
// file that could not be written or verified, each an *Error naming the
// file's path: a file missing in the sandbox matches ErrNotFound, one of
// another size or SHA-256, or not a regular file, has Code Internal and
// says what the sandbox holds and what the manifest says. Paths must be
// distinct after resolving; a bad or repeated path is an InvalidArgument
// error naming it, and nothing is written.
func (s *Sandbox) WriteBundle(ctx context.Context, files []File, opts BundleOptions) (_ Manifest, err error) {
	const op = "write-bundle"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	mpath := opts.ManifestPath
	if mpath == "" {
		mpath = DefaultManifestPath
	}
	mabs, err := s.path(op, "manifest path", mpath)
	if err != nil {
		return Manifest{}, err
	}
	m := Manifest{Version: ManifestVersion, Files: make([]ManifestEntry, len(files))}
	batch := make([]File, 0, len(files)+1)
	seen := map[string]bool{mabs: true}
	for i, f := range files {
		abs, err := s.path(op, "path", f.Path)
		if err != nil {
			return Manifest{}, err
		}
		if seen[abs] {
			what := "given twice"
			if abs == mabs {
				what = "the manifest's path"
			}
			return Manifest{}, invalid(op, s.c.rt.Name(), s.id, "path", "%s (file %d) is %s", shortPath(abs), i, what)
		}
		seen[abs] = true
		sum := sha256.Sum256(f.Data)
		m.Files[i] = ManifestEntry{Path: abs, Size: int64(len(f.Data)), SHA256: hex.EncodeToString(sum[:])}
		batch = append(batch, File{Path: abs, Data: f.Data})
	}
	doc, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, s.wrap(op, mabs, err)
	}
	doc = append(doc, '\n')
	batch = append(batch, File{Path: mabs, Data: doc})
	msum := sha256.Sum256(doc)
	check := append(m.Files[:len(m.Files):len(m.Files)], ManifestEntry{Path: mabs, Size: int64(len(doc)), SHA256: hex.EncodeToString(msum[:])})

	errs := s.writeFiles(ctx, batch)
	var written []int // indexes into check of the files the sandbox accepted
	for i, err := range errs {
		if err == nil {
			written = append(written, i)
		}
	}
	if len(written) > 0 {
		sub := make([]ManifestEntry, len(written))
		for j, i := range written {
			sub[j] = check[i]
		}
		verrs, err := s.verifyManifest(ctx, sub)
		if err != nil {
			return m, errors.Join(append(errs, err)...)
		}
		for j, i := range written {
			errs[i] = verrs[j]
		}
	}
	return m, errors.Join(errs...)
}

// VerifyManifest checks the sandbox's files against m in one command run
// in the sandbox: each must exist as a regular file of the recorded size
// and SHA-256. The error joins one error per file that does not match, in
// m's order, each an *Error naming its path (see WriteBundle). A
// malformed entry (a relative path, a negative size, a SHA-256 that is not
// 64 hex digits) is an InvalidArgument error naming it, and nothing is
// checked.
//
// The command hashes with sha256sum (or shasum -a 256, or openssl). In a
// sandbox that has none of them, each file is downloaded and hashed here
// instead, one download per file.
func (s *Sandbox) VerifyManifest(ctx context.Context, m Manifest) error {
	const op = "verify"
	for i, e := range m.Files {
		abs, err := s.path(op, "manifest path", e.Path)
		if err != nil {
			return err
		}
		switch {
		case abs != e.Path:
			return invalid(op, s.c.rt.Name(), s.id, "manifest", "entry %d: path %s is not absolute and clean", i, shortPath(e.Path))
		case e.Size < 0:
			return invalid(op, s.c.rt.Name(), s.id, "manifest", "entry %d (%s): size %d is negative", i, shortPath(e.Path), e.Size)
		case !sha256RE.MatchString(e.SHA256):
			return invalid(op, s.c.rt.Name(), s.id, "manifest", "entry %d (%s): SHA-256 %q is not 64 lower-case hex digits", i, shortPath(e.Path), clip64(e.SHA256))
		}
	}
	if len(m.Files) == 0 {
		return nil
	}
	errs, err := s.verifyManifest(ctx, m.Files)
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// clip64 bounds a string quoted in a message to 64 bytes.
func clip64(v string) string {
	if len(v) > 64 {
		return v[:64] + "..."
	}
	return v
}

// verifyScript checks files against expectations read from stdin, one a
// line: "SHA256 SIZE PATH" (PATH runs to the end of the line; paths never
// hold control characters). For each line that does not match it prints
// "N missing", "N notfile", "N unreadable", "N size GOT" or "N sha256
// GOT" (N counts lines from 1), and "checked N" at the end, so that a
// cut-off output is told from a clean one. With no hashing tool it prints
// "notool" and stops. No part of it comes from the caller: the
// expectations are data on stdin.
const verifyScript = `tool=
if command -v sha256sum > /dev/null 2>&1; then tool=sha256sum
elif command -v shasum > /dev/null 2>&1; then tool=shasum
elif command -v openssl > /dev/null 2>&1; then tool=openssl
else
	echo notool
	exit 0
fi
sk_sha() {
	case $tool in
	sha256sum) sha256sum ;;
	shasum) shasum -a 256 ;;
	openssl) openssl dgst -sha256 -r ;;
	esac
}
n=0
while IFS= read -r line; do
	n=$((n + 1))
	want=${line%% *}
	rest=${line#* }
	size=${rest%% *}
	p=${rest#* }
	if [ ! -e "$p" ] && [ ! -L "$p" ]; then
		echo "$n missing"
		continue
	fi
	if [ ! -f "$p" ]; then
		echo "$n notfile"
		continue
	fi
	if ! got=$(wc -c < "$p"); then
		echo "$n unreadable"
		continue
	fi
	got=$((got + 0))
	if [ "$got" != "$size" ]; then
		echo "$n size $got"
		continue
	fi
	if ! got=$(sk_sha < "$p"); then
		echo "$n unreadable"
		continue
	fi
	got=${got%% *}
	if [ "$got" != "$want" ]; then echo "$n sha256 $got"; fi
done
echo "checked $n"
`

// verifyManifest checks entries (absolute, validated) with one run of
// verifyScript and returns one error (nil on a match) per entry; the
// second result reports a check that could not run.
func (s *Sandbox) verifyManifest(ctx context.Context, entries []ManifestEntry) ([]error, error) {
	const op = "verify"
	var in bytes.Buffer
	var total int64
	for _, e := range entries {
		fmt.Fprintf(&in, "%s %d %s\n", e.SHA256, e.Size, e.Path)
		total += e.Size
	}
	// Hashing reads every byte once more: allow a minute plus a second
	// for each 16 MiB.
	timeout := time.Minute + time.Duration(total>>24)*time.Second
	maxOut := 64 + len(entries)*96
	res, _, err := s.ExecUnredacted(ctx, Command{Args: []string{"sh", "-c", verifyScript, "sandboxkit-verify"},
		Stdin: &in, Timeout: timeout, MaxOutput: maxOut})
	if err != nil {
		return nil, err
	}
	switch {
	case res.TimedOut:
		return nil, s.wrap(op, "", Errorf(DeadlineExceeded, "sandbox: verifying %d files timed out after %v", len(entries), res.Timeout))
	case res.ExitCode != 0 || res.StdoutTruncated:
		return nil, s.wrap(op, "", Errorf(Internal, "sandbox: the verification command failed (exit code %d, output truncated %t)", res.ExitCode, res.StdoutTruncated))
	}
	out := string(res.Stdout)
	if strings.TrimSpace(out) == "notool" {
		s.c.log.Info("sandbox: no SHA-256 tool in the sandbox; verifying by download", "provider", s.c.rt.Name(), "id", s.id, "files", len(entries))
		errs := make([]error, len(entries))
		for i, e := range entries {
			errs[i] = s.verifyByDownload(ctx, e)
		}
		return errs, nil
	}
	errs := make([]error, len(entries))
	checked := -1
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "checked" {
			checked, _ = strconv.Atoi(f[1])
			continue
		}
		n := 0
		if len(f) >= 2 {
			n, _ = strconv.Atoi(f[0])
		}
		if n < 1 || n > len(entries) {
			return nil, s.wrap(op, "", Errorf(Internal, "sandbox: unexpected verification output %q", clip64(line)))
		}
		e := entries[n-1]
		switch {
		case f[1] == "missing":
			errs[n-1] = s.wrap(op, e.Path, fmt.Errorf("bundle not verified: the file is missing in the sandbox: %w", ErrNotFound))
		case f[1] == "notfile":
			errs[n-1] = s.wrap(op, e.Path, Errorf(Internal, "bundle not verified: not a regular file in the sandbox"))
		case f[1] == "unreadable":
			errs[n-1] = s.wrap(op, e.Path, Errorf(Internal, "bundle not verified: the file cannot be read in the sandbox"))
		case f[1] == "size" && len(f) == 3:
			errs[n-1] = s.wrap(op, e.Path, Errorf(Internal, "bundle not verified: the sandbox has %s bytes, the manifest says %d", f[2], e.Size))
		case f[1] == "sha256" && len(f) == 3:
			errs[n-1] = s.wrap(op, e.Path, Errorf(Internal, "bundle not verified: SHA-256 %s in the sandbox, %s in the manifest", clip64(f[2]), e.SHA256))
		default:
			return nil, s.wrap(op, "", Errorf(Internal, "sandbox: unexpected verification output %q", clip64(line)))
		}
	}
	if checked != len(entries) {
		return nil, s.wrap(op, "", Errorf(Internal, "sandbox: the verification command checked %d of %d files", checked, len(entries)))
	}
	return errs, nil
}

// verifyByDownload checks one entry by reading the file back.
func (s *Sandbox) verifyByDownload(ctx context.Context, e ManifestEntry) error {
	const op = "verify"
	fi, err := s.stat(ctx, op, e.Path)
	if err != nil {
		return err
	}
	if !fi.Mode.IsRegular() {
		return s.wrap(op, e.Path, Errorf(Internal, "bundle not verified: not a regular file in the sandbox"))
	}
	if fi.Size != e.Size {
		return s.wrap(op, e.Path, Errorf(Internal, "bundle not verified: the sandbox has %d bytes, the manifest says %d", fi.Size, e.Size))
	}
	rc, err := s.Download(ctx, e.Path)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		return s.wrap(op, e.Path, Errorf(Internal, "bundle not verified: SHA-256 %s in the sandbox, %s in the manifest", got, e.SHA256))
	}
	return nil
}
