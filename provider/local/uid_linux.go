//go:build linux

package local

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// On a root host, the commands of every sandbox at L0 to L2 run as a uid
// (and gid) of that sandbox's own, so that no sandbox can read, write or
// signal another's files and processes however little else isolates it.
// The uids come from a block no distribution hands out (systemd leaves
// 0x70000000–0x7FFDFFFF unused), picked at random and reserved by an
// file <root>/.uids/<uid> made with O_EXCL (holding the id of the
// sandbox it was made for); the reservation ends with the sandbox's
// directory (removeTree), whose home the uid owns. Two roots draw from the
// same block independently: with 2^24 uids, sharing one is unlikely but
// possible.
const (
	uidBase  = 0x70000000
	uidRange = 1 << 24
	uidsDir  = ".uids"
)

// allocUID reserves a uid for sandbox id and returns it.
func (r *Runtime) allocUID(id string) (int, error) {
	dir := filepath.Join(r.root, uidsDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return 0, fmt.Errorf("uid reservations: %w", err)
	}
	var b [4]byte
	for range 64 {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		uid := uidBase + int(binary.LittleEndian.Uint32(b[:])%uidRange)
		p := filepath.Join(dir, strconv.Itoa(uid))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("uid reservation %s: %w", p, err)
		}
		_, err = f.WriteString(id)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(p)
			return 0, fmt.Errorf("uid reservation %s: %w", p, err)
		}
		return uid, nil
	}
	return 0, errors.New("no free uid after 64 draws")
}

// releaseUID ends the reservation of uid, if it is one of the block.
func (r *Runtime) releaseUID(uid int) {
	if uid < uidBase || uid >= uidBase+uidRange {
		return
	}
	_ = os.Remove(filepath.Join(r.root, uidsDir, strconv.Itoa(uid)))
}
