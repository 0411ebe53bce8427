package local

import (
	"encoding/binary"
	"runtime"
	"testing"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// filterResult runs the filter on one native syscall, as the kernel
// would, and returns the errno it fails with (0 when allowed); ok is false
// when the architecture has no such syscall.
func filterResult(t *testing.T, prog []bpf.RawInstruction, name string, args ...uint64) (e unix.Errno, ok bool) {
	t.Helper()
	info, err := arch.GetInfo(runtime.GOARCH)
	if err != nil {
		t.Skip(err)
	}
	nr, ok := info.SyscallNames[name]
	if !ok {
		return 0, false
	}
	insts, ok := bpf.Disassemble(prog)
	if !ok {
		t.Fatal("filter does not disassemble")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	// struct seccomp_data: nr, arch, instruction pointer, six arguments.
	// The VM loads words big-endian where the kernel loads them in the
	// host's order: store each 32-bit word big-endian at the place the
	// host's order gives it (low word first on little-endian hosts).
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], uint32(nr))
	binary.BigEndian.PutUint32(data[4:], uint32(info.ID))
	lo, hi := 0, 4
	if !littleEndian() {
		lo, hi = 4, 0
	}
	for i, a := range args {
		binary.BigEndian.PutUint32(data[16+8*i+lo:], uint32(a))
		binary.BigEndian.PutUint32(data[16+8*i+hi:], uint32(a>>32))
	}
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	switch uint32(ret) & unix.SECCOMP_RET_ACTION_FULL {
	case unix.SECCOMP_RET_ALLOW:
		return 0, true
	case unix.SECCOMP_RET_ERRNO:
		return unix.Errno(uint32(ret) & unix.SECCOMP_RET_DATA), true
	}
	t.Fatalf("%s: unexpected filter action %#x", name, ret)
	return 0, false
}

func littleEndian() bool {
	var x uint16 = 1
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// TestSeccompSocketRules checks the filter's socket rules in every form
// (L2 network off in the host's namespace, L2 and L4 with a network,
// L3's socket-only filter), whatever the host: the address-family
// allow-list, netlink's one protocol, and arguments whose high bits the
// kernel would drop.
func TestSeccompSocketRules(t *testing.T) {
	for _, tc := range []struct {
		name             string
		full, hostNetOff bool
	}{
		{"L2-off", true, true}, {"full", true, false}, {"L3", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog, err := seccompProgram(tc.full, tc.hostNetOff)
			if err != nil {
				t.Fatal(err)
			}
			ip := unix.Errno(0)
			if tc.hostNetOff {
				ip = unix.EPERM
			}
			cases := []struct {
				call string
				args []uint64
				want unix.Errno
			}{
				{"socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, 0},
				{"socketpair", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, 0},
				{"socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, ip},
				{"socket", []uint64{unix.AF_INET6, unix.SOCK_DGRAM, 0}, ip},
				{"socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, ip},
				{"socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_GENERIC}, map[bool]unix.Errno{true: unix.EPERM, false: unix.EPROTONOSUPPORT}[tc.hostNetOff]},
				{"socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 1<<32 | unix.NETLINK_ROUTE}, map[bool]unix.Errno{true: unix.EPERM, false: unix.EPROTONOSUPPORT}[tc.hostNetOff]},
				{"socket", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, unix.EAFNOSUPPORT},
				{"socket", []uint64{1<<32 | unix.AF_VSOCK, unix.SOCK_STREAM, 0}, unix.EAFNOSUPPORT},
				{"socket", []uint64{1<<32 | unix.AF_UNIX, unix.SOCK_STREAM, 0}, unix.EAFNOSUPPORT},
				{"socketpair", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, unix.EAFNOSUPPORT},
				{"socket", []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, unix.EAFNOSUPPORT},
				{"socket", []uint64{unix.AF_ALG, unix.SOCK_SEQPACKET, 0}, unix.EAFNOSUPPORT},
				{"socket", []uint64{unix.AF_MAX + 7, unix.SOCK_STREAM, 0}, unix.EAFNOSUPPORT},
				{"io_uring_setup", []uint64{8, 0}, unix.EPERM},
				{"socketcall", []uint64{1, 0}, unix.ENOSYS},
				{"getpid", nil, 0},
			}
			if tc.full && runtime.GOARCH != "s390x" {
				cases = append(cases, []struct {
					call string
					args []uint64
					want unix.Errno
				}{
					{"clone", []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, unix.EPERM},
					{"clone", []uint64{uint64(unix.SIGCHLD)}, 0},
					// flags whose low word is another rule's syscall number
					{"clone", []uint64{435}, 0},
					{"clone3", []uint64{0, 88}, unix.ENOSYS},
				}...)
			}
			ran := 0
			for _, c := range cases {
				got, ok := filterResult(t, prog, c.call, c.args...)
				if !ok {
					t.Logf("no %s on %s", c.call, runtime.GOARCH)
					continue
				}
				ran++
				if got != c.want {
					t.Errorf("%s(%#x) fails with %v (%d), want %v (%d)", c.call, c.args, got, int(got), c.want, int(c.want))
				}
			}
			if ran < len(cases)-1 {
				t.Errorf("only %d of %d cases ran", ran, len(cases))
			}
		})
	}
}
