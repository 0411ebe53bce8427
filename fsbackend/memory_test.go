package fsbackend

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// emulate teaches a memory.Runtime the backend's shell program (opScript)
// by answering it from the sandbox's files, the way the program does on a
// real shell minus symbolic links (the memory provider has none). It keeps
// the binary marks in the sandbox as files, as the program does, so a new
// backend instance sees them. Tests over memory use it to count round trips
// and inject faults; behaviour is tested over real shells.
func emulate(rt *memory.Runtime) {
	var mu sync.Mutex // serializes emulated commands, like a file system would
	rt.HandleShell(func(line string) bool { return line == opScript }, func(ctx context.Context, c *memory.Call) int {
		mu.Lock()
		defer mu.Unlock()
		return emulateOp(c)
	})
}

func emulateOp(c *memory.Call) int {
	e := c.Env
	base := e["SBX_BASE"]
	meta := path.Join(base, e["SBX_META"])
	// Creating the workspace: the memory Files API has no mkdir, so a
	// hidden file in the metadata directory makes the directories exist.
	if _, err := c.Files.ReadDir(base); err != nil {
		if err := c.Files.WriteFile(path.Join(meta, ".keep"), nil); err != nil {
			return 70
		}
	}
	fmt.Fprintf(c.Stderr, "pbase=%s\n", base) // as the real helper does, first
	t := base
	if e["SBX_PATH"] != "." {
		t = path.Join(base, e["SBX_PATH"])
	}
	markFile := path.Join(meta, "binary", e["SBX_MARK"])
	marked := func() bool {
		if e["SBX_MARK"] == "" {
			return false
		}
		b, err := c.Files.ReadFile(markFile)
		return err == nil && len(b) > 0
	}
	isDir := func(p string) bool { _, err := c.Files.ReadDir(p); return err == nil }
	isFile := func(p string) bool { _, err := c.Files.ReadFile(p); return err == nil }
	switch e["SBX_OP"] {
	case "read":
		data, err := c.Files.ReadFile(t)
		switch {
		case isDir(t):
			return exitIsDir
		case err != nil:
			return exitNotFound
		}
		if marked() {
			if e["SBX_TEXT"] == "1" {
				return exitBinary
			}
			fmt.Fprintln(c.Stderr, "binary=1")
		}
		fmt.Fprintf(c.Stderr, "path=%s\n", t)
		_, _ = c.Stdout.Write(data)
		return 0
	case "write":
		if isDir(t) {
			return exitIsDir
		}
		for p := path.Dir(t); p != base && p != "/"; p = path.Dir(p) {
			if isFile(p) {
				return exitNotDir
			}
		}
		data, err := io.ReadAll(c.Stdin)
		if err != nil {
			return 72
		}
		if err := c.Files.WriteFile(t, data); err != nil {
			return 72
		}
		if e["SBX_BINARY"] == "1" {
			_ = c.Files.WriteFile(markFile, []byte(e["SBX_PATH"]))
		} else if marked() {
			_ = c.Files.WriteFile(markFile, nil) // an empty mark is no mark
		}
		return 0
	case "ls", "walk":
		if !isDir(t) {
			if isFile(t) {
				return exitNotDir
			}
			return exitNotFound
		}
		var walk func(dir, rel string)
		walk = func(dir, rel string) {
			list, _ := c.Files.ReadDir(dir)
			for _, fi := range list {
				name := path.Join(rel, fi.Name())
				typ := "ff"
				if fi.IsDir() {
					typ = "dd"
				}
				fmt.Fprintf(c.Stdout, "%s %d %d.0 %s\x00", typ, fi.Size, fi.ModTime.Unix(), name)
				if fi.IsDir() && e["SBX_OP"] == "walk" {
					walk(fi.Path, name)
				}
			}
		}
		walk(t, "")
		return 0
	case "grep":
		if !isDir(t) && !isFile(t) {
			return exitNotFound
		}
		if list, err := c.Files.ReadDir(path.Join(meta, "binary")); err == nil {
			for _, fi := range list {
				if b, _ := c.Files.ReadFile(fi.Path); len(b) > 0 {
					fmt.Fprintf(c.Stderr, "mark=%s\n", b)
				}
			}
		}
		grepFile := func(p, shown string) {
			data, _ := c.Files.ReadFile(p)
			if bytes.IndexByte(data, 0) >= 0 {
				return
			}
			for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
				if strings.Contains(line, e["SBX_PATTERN"]) {
					fmt.Fprintf(c.Stdout, "%s\x00%d:%s\n", shown, i+1, line)
				}
			}
		}
		if isFile(t) {
			fmt.Fprintln(c.Stderr, "kind=file")
			grepFile(t, t)
			return 0
		}
		fmt.Fprintln(c.Stderr, "kind=dir")
		var walk func(dir, rel string)
		walk = func(dir, rel string) {
			list, _ := c.Files.ReadDir(dir)
			for _, fi := range list {
				if fi.IsDir() {
					walk(fi.Path, rel+"/"+fi.Name())
				} else {
					grepFile(fi.Path, rel+"/"+fi.Name())
				}
			}
		}
		walk(t, ".")
		return 0
	case "tar":
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		var walk func(dir, rel string) error
		walk = func(dir, rel string) error {
			list, _ := c.Files.ReadDir(dir)
			for _, fi := range list {
				name := rel + "/" + fi.Name()
				if fi.IsDir() {
					if err := walk(fi.Path, name); err != nil {
						return err
					}
					continue
				}
				data, _ := c.Files.ReadFile(fi.Path)
				if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
					return err
				}
				if _, err := tw.Write(data); err != nil {
					return err
				}
			}
			return nil
		}
		if err := errors.Join(walk(base, "."), tw.Close()); err != nil {
			return 74
		}
		archive := path.Join(meta, "tmp", "snapshot.tar0")
		if err := c.Files.WriteFile(archive, buf.Bytes()); err != nil {
			return 74
		}
		fmt.Fprintf(c.Stderr, "tar=%s\n", archive)
		return 0
	}
	return 64
}

// newMemory returns a backend over a fresh memory sandbox that understands
// the backend's program, and the memory Runtime for assertions.
func newMemory(ctx context.Context, opts Options) (*FilesystemBackend, *memory.Runtime, *sandbox.Sandbox, error) {
	client, rt := memory.NewClient()
	emulate(rt)
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := New(sb, opts)
	return b, rt, sb, err
}
