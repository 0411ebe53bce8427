package memory

import (
	"os"
	"syscall"
)

// statSys is the Darwin Stat_t, whose device, mode and link count are
// narrower than Linux's.
func (s *statInfo) statSys() any {
	st := &syscall.Stat_t{Ino: s.ino, Size: s.size, Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	if s.root {
		st.Uid, st.Gid = 0, 0
	}
	st.Dev = int32(s.dev)
	st.Nlink = 1
	st.Mode = uint16(unixMode(s.mode))
	return st
}
