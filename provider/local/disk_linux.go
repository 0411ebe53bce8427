package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A sandbox created with Resources.DiskGiB at L3 or L4 on a root host
// gets a home of that size: an ext4 file system in a sparse image file of
// its directory (diskImage), mounted on the home through a loop device.
// The host-side file methods, which open the home by its host path, see
// the mounted file system; writing past its size fails with ENOSPC inside
// the sandbox and ResourceExhausted through the file methods. The mount
// does not survive a reboot: the next agent start or file call mounts the
// image again.

// diskImage is the name of the home's image file in the sandbox directory.
const diskImage = "home.img"

// lookMkfs finds mkfs.ext4 (Debian package e2fsprogs); a variable for
// tests.
var lookMkfs = func() string {
	for _, p := range []string{"mkfs.ext4", "/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	return ""
}

// diskUnsupported says why a disk quota cannot be enforced for sandboxes
// at level l on this host, or returns "".
func (r *Runtime) diskUnsupported(l Level) string {
	switch {
	case l < L3:
		return "disk quota not enforced: DiskGiB is enforced at L3 and L4 only"
	case os.Getuid() != 0:
		return "disk quota not enforced: it needs root (a loop-mounted image for the home)"
	case r.mkfs == "":
		return "disk quota not enforced: mkfs.ext4 is not installed (Debian package e2fsprogs)"
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "disk quota not enforced: no loop devices (/dev/loop-control)"
	}
	return ""
}

// makeDisk creates a sparse image of gib GiB in dir, formats it as ext4
// with its root owned by uid:gid and mounts it on dir/home.
func (r *Runtime) makeDisk(ctx context.Context, dir string, gib, uid, gid int) error {
	img := filepath.Join(dir, diskImage)
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(gib) << 30)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// No journal and no reserved blocks: the quota is the user's whole
	// image; lazy initialisation keeps mkfs quick.
	out, err := exec.CommandContext(ctx, r.mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal",
		"-E", fmt.Sprintf("root_owner=%d:%d,lazy_itable_init=1,nodiscard", uid, gid), img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4: %w: %s", err, out)
	}
	return mountDisk(img, filepath.Join(dir, "home"))
}

// ensureDisk mounts the home's image of sandbox m again where it is not
// mounted (after a reboot). Sandboxes without an image are left alone.
func (r *Runtime) ensureDisk(m *meta) error {
	if m.Resources.DiskGiB <= 0 || m.Disk == "" {
		return nil
	}
	dir := r.dir(m.ID)
	img := filepath.Join(dir, diskImage)
	if _, err := os.Stat(img); err != nil {
		return nil
	}
	home := filepath.Join(dir, "home")
	if mounted(dir, home) {
		return nil
	}
	return mountDisk(img, home)
}

// mounted reports whether home is on another file system than dir.
func mounted(dir, home string) bool {
	var a, b unix.Stat_t
	if unix.Stat(dir, &a) != nil || unix.Stat(home, &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// mountDisk mounts img (ext4, nosuid, nodev) on home. A loop device that
// already serves img (the sandbox's agent still holds a mount of it) is
// mounted again, so that both mounts share one file system; otherwise img
// is attached to a free loop device, set to detach itself once unmounted.
func mountDisk(img, home string) error {
	if dev := loopOf(img); dev != "" {
		if err := unix.Mount(dev, home, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("mount %s on the home: %w", dev, err)
		}
		return nil
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer ctl.Close()
	imgf, err := os.OpenFile(img, os.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer imgf.Close()
	for range 16 { // another process may take the free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		lf, err := os.OpenFile(dev, os.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("loop device: %w", err)
		}
		cfg := unix.LoopConfig{Fd: uint32(imgf.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:], img)
		if err := unix.IoctlLoopConfigure(int(lf.Fd()), &cfg); err != nil {
			lf.Close()
			if errors.Is(err, unix.EBUSY) {
				continue
			}
			return fmt.Errorf("loop device %s: %w", dev, err)
		}
		// The mount holds the device; closing it then leaves the clean-up
		// to the unmount (autoclear).
		err = unix.Mount(dev, home, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "")
		lf.Close()
		if err != nil {
			return fmt.Errorf("mount %s on the home: %w", dev, err)
		}
		return nil
	}
	return errors.New("loop device: none free")
}

// loopOf returns the loop device whose backing file is img, or "".
func loopOf(img string) string {
	ents, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, p := range ents {
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == img {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(p)))
		}
	}
	return ""
}

// unmountDisk unmounts the home of the sandbox directory dir, if an image
// is mounted there.
func unmountDisk(dir string) {
	if _, err := os.Stat(filepath.Join(dir, diskImage)); err != nil {
		return
	}
	home := filepath.Join(dir, "home")
	for range 3 {
		if !mounted(dir, home) {
			return
		}
		_ = unix.Unmount(home, unix.MNT_DETACH)
	}
}
