package local

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// netWaitTimeout bounds how long a new agent waits for pasta to configure
// its network namespace (below the spawner's 30 s bound on the set-up).
const netWaitTimeout = 20 * time.Second

// netWaitGrace is how long, once one wanted family has its default route,
// the agent still waits for the other one (pasta adds the IPv6 route right
// after the IPv4 one; a host whose IPv6 pasta does not copy costs this
// once instead of a failed create).
const netWaitGrace = time.Second

// hostDefaultRoutes reports whether the host has an IPv4 and an IPv6
// default route that pasta copies into a sandbox (--config-net takes the
// template interface of each family from the host's default route): the
// routes a new agent waits for. A reject route (the IPv6 one on lo) does
// not count.
func hostDefaultRoutes() (v4, v6 bool) {
	scan := func(path string, match func([]string) bool) bool {
		f, err := os.Open(path)
		if err != nil {
			return false
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if match(strings.Fields(s.Text())) {
				return true
			}
		}
		return false
	}
	// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
	v4 = scan("/proc/net/route", func(f []string) bool {
		return len(f) >= 8 && f[0] != "lo" && f[1] == "00000000" && f[7] == "00000000"
	})
	// dest dest_len src src_len next_hop metric refcnt use flags iface
	v6 = scan("/proc/net/ipv6_route", func(f []string) bool {
		if len(f) < 10 || f[9] == "lo" || f[1] != "00" || strings.Trim(f[0], "0") != "" {
			return false
		}
		var flags uint32
		_, err := fmt.Sscanf(f[8], "%x", &flags)
		return err == nil && flags&unix.RTF_REJECT == 0
	})
	return v4, v6
}

// waitDefaultRoutes returns once the calling process's network namespace
// has a default route in the main table for each wanted family (IPv4 when
// v4, IPv6 when v6): pasta has then configured the namespace, and packets
// sent from then on queue on its tap device until it serves them, so a
// command started afterwards has the network. It is event-driven: it
// subscribes to route changes before it lists the routes, so none is
// missed. Once one family is there, the other gets netWaitGrace more.
func waitDefaultRoutes(v4, v6 bool, timeout time.Duration) error {
	if !v4 && !v6 {
		return nil
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	var groups uint32
	if v4 {
		groups |= unix.RTMGRP_IPV4_ROUTE
	}
	if v6 {
		groups |= unix.RTMGRP_IPV6_ROUTE
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	// Dump every route of the namespace: those pasta added before the
	// subscription took effect.
	req := make([]byte, unix.SizeofNlMsghdr+unix.SizeofRtMsg)
	binary.NativeEndian.PutUint32(req[0:4], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:6], unix.RTM_GETROUTE)
	binary.NativeEndian.PutUint16(req[6:8], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:12], 1) // sequence; the family (rtmsg) stays AF_UNSPEC: all
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink route dump: %w", err)
	}
	deadline := time.Now().Add(timeout)
	got4, got6 := !v4, !v6
	buf := make([]byte, 64<<10)
	for !got4 || !got6 {
		left := time.Until(deadline)
		if left <= 0 {
			if got4 || got6 {
				return nil // one family after the grace: the other is not coming
			}
			return fmt.Errorf("no default route after %v (pasta did not configure the network namespace)", timeout)
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("netlink timeout: %w", err)
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("netlink read: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			if m.Header.Type != unix.RTM_NEWROUTE || len(m.Data) < unix.SizeofRtMsg {
				continue
			}
			family, dstLen, table, typ := m.Data[0], m.Data[1], m.Data[4], m.Data[7]
			if dstLen != 0 || table != unix.RT_TABLE_MAIN || typ != unix.RTN_UNICAST {
				continue
			}
			had := got4 || got6
			switch family {
			case unix.AF_INET:
				got4 = true
			case unix.AF_INET6:
				got6 = true
			}
			if !had && (got4 || got6) {
				deadline = time.Now().Add(min(time.Until(deadline), netWaitGrace))
			}
		}
	}
	return nil
}
