package run

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxInlineID is the longest id (in bytes) whose directory name is its own
// base32 encoding: 100 bytes encode to 160 characters, well under the 255
// bytes a file name may have. Longer ids are named by their SHA-256, and the
// id itself is kept in the request record and checked on every use.
const maxInlineID = 100

// MaxIDLen is the longest run id accepted, in bytes.
const MaxIDLen = 4096

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// encodeID returns the directory name of a run id: "b" and the lower-case
// base32 of the id's bytes (a bijection, so distinct ids never share a
// name), or for a long id "h" and the hex SHA-256 of the id. The prefixes
// keep the two namespaces apart; the names use only [a-z0-9], so they are
// safe on case-insensitive file systems too.
func encodeID(id string) string {
	if len(id) <= maxInlineID {
		return "b" + strings.ToLower(b32.EncodeToString([]byte(id)))
	}
	sum := sha256.Sum256([]byte(id))
	return "h" + hex.EncodeToString(sum[:])
}

// fingerprint identifies a request: SHA-256 over the argv, the resolved
// working directory and the environment sorted by name. Every field is
// length-prefixed, so no two different requests share an encoding
// (whatever bytes they hold), and the budget is not part of it.
func fingerprint(argv []string, dir string, env map[string]string) string {
	h := sha256.New()
	writeField(h, "sandboxkit/run/v1")
	writeCount(h, len(argv))
	for _, a := range argv {
		writeField(h, a)
	}
	writeField(h, dir)
	keys := slices.Sorted(maps.Keys(env))
	writeCount(h, len(keys))
	for _, k := range keys {
		writeField(h, k)
		writeField(h, env[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeCount(h hash.Hash, n int) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

func writeField(h hash.Hash, s string) {
	writeCount(h, len(s))
	h.Write([]byte(s))
}

// quoteID renders an id for an error message: quoted, bounded in length.
func quoteID(id string) string {
	if len(id) > 64 {
		return strconv.Quote(id[:64]) + "..."
	}
	return strconv.Quote(id)
}

// defaultID returns the id of a run started without one (see Request.ID):
// "run-<sandbox id>-<Unix milliseconds>-<8 random hex digits>".
func defaultID(sandboxID string, now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "run-" + sandboxID + "-" + strconv.FormatInt(now.UnixMilli(), 10) + "-" + hex.EncodeToString(b[:])
}
