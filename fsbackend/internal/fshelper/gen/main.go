// Command gen builds fshelper for every architecture fsbackend embeds and
// writes the compressed binaries and their SHA-256 sums. It runs from
// fsbackend's go generate step:
//
//	go generate ./fsbackend
//
// The build is reproducible: CGO_ENABLED=0, -trimpath and
// -ldflags '-s -w -buildid=', so the same Go release builds the same bytes
// (fsbackend's TestHelperReproducible checks it); gzip output carries no
// name or time.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Arches are the architectures embedded.
var arches = []string{"amd64", "arm64"}

func main() {
	out := flag.String("o", "helperbin", "output directory")
	src := flag.String("src", "./internal/fshelper", "the helper's package")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	tmp, err := os.MkdirTemp("", "fshelper")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	var sums strings.Builder
	sums.WriteString("# " + runtime.Version() + "\n")
	for _, arch := range arches {
		bin := filepath.Join(tmp, "fshelper-linux-"+arch)
		if err := Build(*src, arch, bin); err != nil {
			log.Fatal(err)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			log.Fatal(err)
		}
		sum := sha256.Sum256(data)
		sums.WriteString(hex.EncodeToString(sum[:]) + "  fshelper-linux-" + arch + "\n")
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := zw.Write(data); err != nil {
			log.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*out, "fshelper-linux-"+arch+".gz"), buf.Bytes(), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(*out, "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

// Build builds the helper for linux/arch into bin, reproducibly.
func Build(src, arch, bin string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -buildid=", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=", "GOAMD64=v1", "GOARM64=v8.0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}
