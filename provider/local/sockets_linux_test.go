package local

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"golang.org/x/sys/unix"
)

// familyProbe tries, inside a sandbox, to make sockets of the address
// families a sandbox may use and of others it must not reach (vsock, whose
// port space is the host's; packet, bluetooth, alg, key, tipc, rds...),
// through socket(), socketpair() and a raw socket() whose family carries
// high bits the kernel ignores. It prints name=ok or name=<errno name>.
const familyProbe = `
import ctypes, errno, os, socket
def name(e):
    return errno.errorcode.get(e, str(e))
def try_(label, fn):
    try:
        s = fn()
        for x in (s if isinstance(s, tuple) else (s,)):
            x.close()
        print(label + "=ok")
    except OSError as e:
        print(label + "=" + name(e.errno))
fams = {"unix": 1, "inet": 2, "inet6": 10, "netlink": 16, "packet": 17, "key": 15,
        "bluetooth": 31, "alg": 38, "vsock": 40, "tipc": 30, "rds": 21, "appletalk": 5,
        "x25": 9, "can": 29, "qipcrtr": 42, "smc": 43, "xdp": 44, "mctp": 45}
types = {"vsock": socket.SOCK_STREAM, "packet": socket.SOCK_DGRAM, "key": socket.SOCK_RAW,
         "alg": socket.SOCK_SEQPACKET, "rds": socket.SOCK_SEQPACKET, "tipc": socket.SOCK_RDM,
         "bluetooth": socket.SOCK_STREAM, "can": socket.SOCK_RAW, "xdp": socket.SOCK_RAW}
for k, f in fams.items():
    t = types.get(k, socket.SOCK_DGRAM if k not in ("unix", "inet", "inet6") else socket.SOCK_STREAM)
    p = 2 if k == "key" else 0
    try_(k, lambda: socket.socket(f, t, p))
try_("socketpair_unix", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))
try_("socketpair_tipc", lambda: socket.socketpair(30, socket.SOCK_SEQPACKET))
try_("netlink_route", lambda: socket.socket(16, socket.SOCK_RAW, 0))
try_("netlink_generic", lambda: socket.socket(16, socket.SOCK_RAW, 16))
try_("netlink_audit", lambda: socket.socket(16, socket.SOCK_RAW, 9))
try_("netlink_uevent", lambda: socket.socket(16, socket.SOCK_RAW, 15))
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def raw(nr, fam):
    fd = libc.syscall(ctypes.c_long(nr), ctypes.c_long(fam), ctypes.c_long(1), ctypes.c_long(0))
    if fd < 0:
        return name(ctypes.get_errno())
    os.close(fd)
    return "ok"
if os.uname().machine == "x86_64":
    print("vsock_high=" + raw(41, (1 << 32) | 40))
    print("unix_high=" + raw(41, (1 << 32) | 1))
`

// TestSocketFamilies checks, at each level with seccomp or namespaces and
// with the network on and off, which address families a sandbox can open
// sockets of: those of its own network (unix, inet, inet6, and netlink's
// routing protocol where the network is its own or the host's) and no
// other, so that no sandbox reaches the host's vsock port space (the
// hypervisor's services on a VM host) or a rarely used protocol of the
// host's kernel.
func TestSocketFamilies(t *testing.T) {
	t.Parallel()
	host := map[string]string{"network": "host"}
	for _, tc := range []struct {
		level Level
		opts  sandbox.CreateOptions
	}{
		{L2, sandbox.CreateOptions{NoNetwork: true}},
		{L2, sandbox.CreateOptions{ProviderOptions: host}},
		{L3, sandbox.CreateOptions{NoNetwork: true}},
		{L3, sandbox.CreateOptions{}},
		{L3, sandbox.CreateOptions{ProviderOptions: host}},
		{L4, sandbox.CreateOptions{NoNetwork: true}},
		{L4, sandbox.CreateOptions{}},
		{L4, sandbox.CreateOptions{ProviderOptions: host}},
	} {
		name := tc.level.String() + "/nonet=" + strconv.FormatBool(tc.opts.NoNetwork)
		if tc.opts.ProviderOptions != nil {
			name += "/host"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := levelRuntime(t, tc.level)
			sb := mustCreate(ctx, t, sandbox.NewClient(rt), tc.opts)
			if err := sb.WriteFile(ctx, "probe.py", []byte(familyProbe)); err != nil {
				t.Fatal(err)
			}
			if res := run(ctx, t, sb, "command -v python3"); res.ExitCode != 0 {
				t.Skip("needs python3 inside the sandbox")
			}
			res, err := sb.Exec(ctx, sandbox.Command{Shell: "python3 probe.py", Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("probe exit %d: %q %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			got := map[string]string{}
			for l := range strings.Lines(string(res.Stdout)) {
				if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
					got[k] = v
				}
			}
			// Families outside the allow-list fail as on a kernel without
			// them; netlink protocols other than routing, as an unknown one.
			want := map[string]string{
				"unix": "ok", "socketpair_unix": "ok",
				"vsock": "EAFNOSUPPORT", "packet": "EAFNOSUPPORT", "key": "EAFNOSUPPORT",
				"bluetooth": "EAFNOSUPPORT", "alg": "EAFNOSUPPORT", "tipc": "EAFNOSUPPORT",
				"rds": "EAFNOSUPPORT", "appletalk": "EAFNOSUPPORT", "x25": "EAFNOSUPPORT",
				"can": "EAFNOSUPPORT", "qipcrtr": "EAFNOSUPPORT", "smc": "EAFNOSUPPORT",
				"xdp": "EAFNOSUPPORT", "mctp": "EAFNOSUPPORT", "socketpair_tipc": "EAFNOSUPPORT",
				"netlink_generic": "EPROTONOSUPPORT", "netlink_audit": "EPROTONOSUPPORT",
				"netlink_uevent": "EPROTONOSUPPORT",
			}
			if _, ok := got["vsock_high"]; ok {
				want["vsock_high"], want["unix_high"] = "EAFNOSUPPORT", "EAFNOSUPPORT"
			}
			netMode := sb.Info().Detail["network"]
			if netMode == "off" && tc.level == L2 {
				// The host's network namespace: nothing of it is reachable.
				for _, k := range []string{"inet", "inet6", "netlink", "netlink_route", "netlink_generic", "netlink_audit", "netlink_uevent"} {
					want[k] = "EPERM"
				}
			} else {
				want["inet"], want["netlink"], want["netlink_route"] = "ok", "ok", "ok"
				// inet6 may be absent from the host's kernel (or disabled).
				if got["inet6"] != "EAFNOSUPPORT" || hostHasInet6() {
					want["inet6"] = "ok"
				}
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s = %q, want %q", k, got[k], w)
				}
			}
			info, err := sb.Refresh(ctx)
			if err != nil {
				t.Fatal(err)
			}
			fams := info.Detail["socket_families"]
			if !strings.Contains(fams, "unix") || strings.Contains(fams, "any") {
				t.Errorf("Info.Detail[socket_families] = %q, want the allow-list", fams)
			}
			if t.Failed() {
				t.Logf("probe output: %s%s", res.Stdout, res.Stderr)
			}
		})
	}
}

// hostHasInet6 reports whether the test's own process can open an IPv6
// socket.
func hostHasInet6() bool {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}
