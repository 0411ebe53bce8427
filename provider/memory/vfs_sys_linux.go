package memory

import (
	"os"
	"syscall"
)

func (s *statInfo) statSys() any {
	st := &syscall.Stat_t{Ino: s.ino, Size: s.size, Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	if s.root {
		st.Uid, st.Gid = 0, 0
	}
	st.Dev = s.dev
	st.Nlink = 1
	st.Mode = unixMode(s.mode)
	return st
}
