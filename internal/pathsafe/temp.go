package pathsafe

import (
	"crypto/rand"
	"encoding/hex"
	"path"
	"strings"
)

// TempSuffix ends the name of every temporary file an atomic upload
// creates next to its target.
const TempSuffix = ".sbx.tmp"

// TempSibling returns a fresh name for a temporary file in the directory of
// p, the clean absolute path of an upload's target: a hidden name derived
// from p's last element, a random part and TempSuffix. Bytes written there
// and then renamed over p replace p atomically.
func TempSibling(p string) string {
	dir, base := path.Split(p)
	if len(base) > 100 {
		base = strings.ToValidUTF8(base[:100], "")
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return dir + "." + base + "." + hex.EncodeToString(b[:]) + TempSuffix
}
