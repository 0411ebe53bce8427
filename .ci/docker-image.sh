#!/usr/bin/env bash
# Builds the docker provider's test image without any registry: a root file
# system of the busybox-static Debian package (a shell and the usual tools),
# a non-root user "user" (uid 1000) with a writable home, imported with
# `docker import`. Usage: docker-image.sh [TAG] (default sandboxkit/busybox:test);
# DOCKER_HOST names the engine.
set -euo pipefail
tag=${1:-sandboxkit/busybox:test}
bb=$(command -v busybox || true)
if [ -z "$bb" ] || ! file -L "$bb" 2>/dev/null | grep -q 'statically linked'; then
  bb=/bin/busybox
fi
if [ ! -x "$bb" ]; then
  echo "docker-image.sh: busybox not found: apt-get install busybox-static" >&2
  exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,home/user,root,proc,sys,dev,var/tmp,run}
cp "$bb" "$root/bin/busybox"
for a in $("$root/bin/busybox" --list-full); do
  [ -e "$root/$a" ] || ln -s /bin/busybox "$root/$a"
done
# Debian's busybox has no printenv applet: a POSIX stand-in.
if [ ! -e "$root/usr/bin/printenv" ]; then
  cat >"$root/usr/bin/printenv" <<'SH'
#!/bin/sh
[ $# -eq 0 ] && exec env
rc=0
for v; do
  if eval "[ -n \"\${$v+x}\" ]"; then eval "printf '%s\\n' \"\${$v}\""; else rc=1; fi
done
exit $rc
SH
  chmod 0755 "$root/usr/bin/printenv"
fi
printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nuser:x:1000:\n' >"$root/etc/group"
chmod 1777 "$root/tmp" "$root/var/tmp"
chown 1000:1000 "$root/home/user"
chmod 0755 "$root/home/user"
tar -C "$root" --numeric-owner -cf - . | docker import -c 'USER user' -c 'WORKDIR /home/user' -c 'ENV HOME=/home/user PATH=/usr/sbin:/usr/bin:/sbin:/bin' - "$tag" >/dev/null
echo "$tag"
