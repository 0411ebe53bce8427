// Package envd holds the protocol descriptions of envd, the daemon inside
// every E2B sandbox, and the code generated from them: process.Process
// and filesystem.Filesystem over Connect.
//
// Regenerate with `go generate` (needs protoc, protoc-gen-go v1.36.12 and
// protoc-gen-connect-go v1.21.1 on PATH).
package envd

//go:generate protoc -I . --go_out=. --go_opt=module=github.com/sandboxkit/sandbox/provider/e2b/internal/envd --connect-go_out=. --connect-go_opt=module=github.com/sandboxkit/sandbox/provider/e2b/internal/envd process.proto filesystem.proto
