package fsbackend

// opScript is the one shell program the backend runs for file operations.
// It is a constant: every input (the workspace, the path, the pattern)
// arrives in an SBX_* environment variable and is only ever expanded inside
// double quotes, so no user text becomes shell syntax. Each run resolves
// the workspace and the target physically (cd -P, pwd -P, readlink -f)
// and refuses a target that leads outside the workspace before touching
// it, so the jail check and the operation share one round trip.
//
// Inputs: SBX_OP (read, write, ls, walk, grep, tar); SBX_BASE, the
// workspace (absolute); SBX_PBASE, where the workspace resolved to before,
// if known (a workspace that now resolves elsewhere, for example because it
// was replaced by a symbolic link, is refused); SBX_META, the metadata
// directory's name; SBX_PATH, the target relative to the workspace ("." for
// the root), already checked element-wise; SBX_MARK, the file name of the
// target's binary mark; SBX_TEXT=1, refuse a marked file; SBX_BINARY=1,
// set the mark on write (otherwise a write clears it); SBX_PATTERN and
// SBX_MAX for grep.
//
// Outputs: the operation's data on stdout; "key=value" lines on stderr
// (pbase= the resolved workspace, path= the resolved target, binary=1 for
// a marked file, kind=file|dir for grep, mark=<path> for each marked file,
// tar=<file> for the archive, error=<text>); and an exit code: 0 for
// success, one of the exit* constants below for a failure the agent can
// act on, anything else for an unexpected failure.
//
// The archive of the tar operation is written under the metadata
// directory, inside the workspace, because providers may serve files only
// under the sandbox's home; the caller removes it.
//
// Requirements on the sandbox image: a POSIX sh, cat, mkdir, rm, readlink
// -f, GNU find (-printf), grep (-r -I -F --null), tar and mktemp: Debian,
// Ubuntu and the E2B and Daytona default images have them.
const opScript = `set -u
die() { printf 'error=%s\n' "$2" >&2; exit "$1"; }
mkdir -p -- "$SBX_BASE" 2>/dev/null
pbase=$(cd -P -- "$SBX_BASE" 2>/dev/null && pwd -P) || die 70 "workspace directory is unusable"
if [ -n "${SBX_PBASE:-}" ] && [ "$pbase" != "$SBX_PBASE" ]; then die 103 "the workspace now resolves elsewhere"; fi
printf 'pbase=%s\n' "$pbase" >&2
if [ "$pbase" = / ]; then pre=/; else pre=$pbase/; fi
meta=$pre$SBX_META
inside() { [ "$pbase" = / ] && return 0; case $1 in "$pbase"|"$pbase"/*) return 0;; esac; return 1; }
inmeta() { case $1 in "$meta"|"$meta"/*) return 0;; esac; return 1; }
canon() {
  if [ -d "$1" ]; then (cd -P -- "$1" 2>/dev/null && pwd -P); return; fi
  if [ -L "$1" ]; then readlink -f -- "$1"; return; fi
  cd_d=${1%/*}; [ -n "$cd_d" ] || cd_d=/
  cd_d=$(cd -P -- "$cd_d" 2>/dev/null && pwd -P) || return 1
  if [ "$cd_d" = / ]; then printf '/%s\n' "${1##*/}"; else printf '%s/%s\n' "$cd_d" "${1##*/}"; fi
}
metaok() { [ -d "$meta/binary" ] && [ ! -L "$meta" ] && [ ! -L "$meta/binary" ]; }
marked() { [ -n "${SBX_MARK:-}" ] && metaok && [ -e "$meta/binary/$SBX_MARK" ]; }
if [ "$SBX_PATH" = . ]; then t=$pbase; else t=$pre$SBX_PATH; fi
existing() {
  [ -e "$t" ] || die 100 "not found"
  r=$(canon "$t") || die 100 "not found"
  inside "$r" || die 103 "leads outside the workspace"
  inmeta "$r" && die 103 "names the backend's metadata"
  return 0
}
case $SBX_OP in
read)
  existing
  [ -d "$r" ] && die 101 "is a directory"
  if marked; then
    [ "${SBX_TEXT:-}" = 1 ] && die 105 "binary"
    printf 'binary=1\n' >&2
  fi
  [ -r "$r" ] || die 104 "permission denied"
  printf 'path=%s\n' "$r" >&2
  exec cat -- "$r" ;;
write)
  a=$t; rest=
  while [ ! -e "$a" ] && [ ! -L "$a" ]; do
    rest=${a##*/}${rest:+/$rest}; a=${a%/*}; [ -n "$a" ] || a=/
  done
  if [ -z "$rest" ]; then
    [ -e "$t" ] || die 103 "is a symbolic link to a missing target"
    r=$(canon "$t") || die 100 "not found"
    inside "$r" || die 103 "leads outside the workspace"
    [ -d "$r" ] && die 101 "is a directory"
    [ -w "$r" ] || die 104 "permission denied"
  else
    [ -e "$a" ] || die 103 "is below a symbolic link to a missing target"
    ra=$(canon "$a") || die 100 "not found"
    inside "$ra" || die 103 "leads outside the workspace"
    [ -d "$ra" ] || die 102 "a parent is not a directory"
    if [ "$ra" = / ]; then r=/$rest; else r=$ra/$rest; fi
    mkdir -p -- "${r%/*}" 2>/dev/null || die 104 "cannot create the parent directory"
    [ -w "${r%/*}" ] || die 104 "permission denied"
  fi
  inmeta "$r" && die 103 "names the backend's metadata"
  cat > "$r" || die 72 "write failed"
  if [ -n "${SBX_MARK:-}" ]; then
    if [ "${SBX_BINARY:-}" = 1 ]; then
      for d in "$meta" "$meta/binary"; do
        if [ -L "$d" ] || { [ -e "$d" ] && [ ! -d "$d" ]; }; then rm -f -- "$d"; fi
      done
      mkdir -p -- "$meta/binary" && rm -f -- "$meta/binary/$SBX_MARK" &&
        printf '%s' "$SBX_PATH" > "$meta/binary/$SBX_MARK" || die 71 "cannot record the binary mark"
    elif metaok; then
      rm -f -- "$meta/binary/$SBX_MARK"
    fi
  fi
  exit 0 ;;
ls|walk)
  existing
  [ -d "$r" ] || die 102 "not a directory"
  { [ -r "$r" ] && [ -x "$r" ]; } || die 104 "permission denied"
  if [ "$SBX_OP" = ls ]; then depth=1; else depth=1000000; fi
  find "$r" -mindepth 1 -maxdepth "$depth" -printf '%y%Y %s %T@ %P\0' 2>/dev/null
  exit 0 ;;
grep)
  existing
  if metaok; then
    for f in "$meta"/binary/*; do
      [ -f "$f" ] && [ ! -L "$f" ] && { printf 'mark='; cat -- "$f"; printf '\n'; }
    done >&2
  fi
  set -- -n -I -F --null
  [ "${SBX_MAX:-0}" -gt 0 ] && set -- "$@" -m "$SBX_MAX"
  if [ -d "$r" ]; then
    printf 'kind=dir\n' >&2
    cd -- "$r" || die 104 "permission denied"
    grep -r "$@" -e "$SBX_PATTERN" -- . 2>/dev/null
  else
    printf 'kind=file\n' >&2
    grep -H "$@" -e "$SBX_PATTERN" -- "$r" 2>/dev/null
  fi
  [ $? -le 2 ] || die 73 "grep failed"
  exit 0 ;;
tar)
  for d in "$meta" "$meta/tmp"; do
    if [ -L "$d" ] || { [ -e "$d" ] && [ ! -d "$d" ]; }; then rm -f -- "$d"; fi
  done
  mkdir -p -- "$meta/tmp" && f=$(mktemp "$meta/tmp/snapshot.XXXXXX") || die 74 "cannot create the archive file"
  (cd -- "$pbase" && tar -cf "$f" --exclude="./$SBX_META/tmp" .) 2>/dev/null
  [ -s "$f" ] || { rm -f -- "$f"; die 74 "tar failed"; }
  printf 'tar=%s\n' "$f" >&2
  exit 0 ;;
*)
  die 64 "unknown operation" ;;
esac
`

// Exit codes of opScript.
const (
	exitNotFound = 100
	exitIsDir    = 101
	exitNotDir   = 102
	exitEscape   = 103
	exitDenied   = 104
	exitBinary   = 105
)
