package fsbackend

// opScript is the one shell program the backend runs for file operations.
// It is a constant: every input (the workspace, the path, the pattern)
// arrives in an SBX_* environment variable and is only ever expanded inside
// double quotes, so no user text becomes shell syntax.
//
// # Resolution
//
// The program changes into the workspace (cd -P) and checks the directory
// it landed in against the pin (device and inode, from find -printf %D-%i)
// before anything else: a workspace replaced since the backend first saw
// it, by a symbolic link or another directory, is refused (exit 106). (A
// read, which changes nothing, checks the pin in the one find that also
// checks the opened file, before a byte is sent, to save a process.) The
// pin is SBX_PIN when the backend knows it, else the content of SBX_PINFILE,
// a file next to the workspace (outside it, where no file tool reaches and a
// swap of the workspace does not move it), which the first run writes.
//
// The target is then reached one element at a time with cd -P relative to
// the current directory, never through a path string resolved again later:
// after each step the shell's physical working directory ($PWD after cd -P,
// the kernel's getcwd) must lie in the workspace and outside its metadata,
// so a directory swapped for a symbolic link between two tool calls, or
// during one, leads nowhere. A final element that is a symbolic link is
// resolved the same way (readlink, then cd -P into its directory), at most
// 40 times. Only the last element is then opened by name, relative to that
// directory: for a read, the open file's identity is checked after the open
// (/proc/self/fd/3 must name the same path, and the file must be regular,
// have one link and fit the cap) before any byte is sent. A write creates a
// new file exclusively (set -C), opens the file read-write without
// truncating it, makes the same check, and only then truncates it (through
// /proc/self/fd/4, the open file itself) and writes. Without /proc these
// checks after the open are skipped (see the package documentation).
//
// # Inputs
//
// SBX_OP (pin, read, write, remove, ls, walk, grep, tar); SBX_BASE, the workspace
// (absolute); SBX_PIN and SBX_PINFILE, above; SBX_META, the metadata
// directory's name; SBX_PATH, the target relative to the workspace ("." for
// the root), already checked element-wise; SBX_LIMIT, the largest file read,
// searched or archived, in bytes; SBX_TEXT=1, refuse a file marked binary;
// SBX_BINARY=1, mark the written file binary (otherwise a write clears its
// mark); SBX_LINES=1 with SBX_FROM (1-based) and SBX_COUNT, read a
// window of lines of a file larger than SBX_LIMIT rather than refuse it
// (records window=1 and lines=<count>); SBX_PATTERN, SBX_MAX, SBX_REGEX=1 (a regular expression: grep
// -P where it has PCRE, else -E), SBX_ICASE=1 (-i), SBX_BEFORE and
// SBX_AFTER (-B, -A) for grep; SBX_PINPATH, the workspace's physical path
// when pinned (see repin). A grep line is "<name>\0<line>:<text>" for a
// match and "<name>\0<line>-<text>" for context (without group
// separators).
//
// # Outputs
//
// The operation's data on stdout; records "key=value" on stderr, each ended
// by a NUL byte, so that no name or text can forge another record: pin= and
// pbase= (the workspace's identity and physical path), binary=1 for a marked
// file, kind=file|dir for grep, mark=<key> (one per entry of the binary
// index), f=<links> <size> <key> <path> (a regular file grep or tar covers;
// the backend passes over those with several links or above SBX_LIMIT),
// u=d <path> and u=f <path> (a directory grep cannot open, a file it
// cannot read), tar=<file>, warning=<text>, error=<text>. The walk
// operation marks a directory it cannot open with a "!d 0 0 <path>" entry
// after the directory's own. The exit code is 0 for success, one of the
// exit* constants below for a failure the agent can act on, anything else
// for an unexpected failure.
//
// # The binary index
//
// A file written as bytes is marked by an empty file in $SBX_META/binary
// named after its identity, "<device>-<inode>-<size>-<mtime>": the mark
// follows the file through renames and every alias (symbolic or hard link),
// and lapses when the file changes outside the backend or the inode is
// reused, after which the content decides. Only the entries' names are
// read, never their contents; the backend uses at most 1 MiB of them and
// ignores names that are not identities.
//
// The archive of the tar operation is written under the metadata
// directory, inside the workspace, because providers may serve files only
// under the sandbox's home; the caller removes it.
//
// # Requirements
//
// A POSIX sh, cat, head -c, mkdir, mktemp, mv, readlink, rm, chmod, GNU find
// (-printf with %D %i %n %T@ %l %p, -fprintf, -links, -size, -readable,
// -executable, -prune), GNU grep (-r
// -F -E -I -H -n -i -A -B --null --devices=skip --no-group-separator,
// -c -x; -P where built with PCRE) and GNU tar (--anchored
// --no-wildcards --exclude-from): Debian, Ubuntu and the E2B and Daytona
// default images have them, as does the memory provider's shell. /proc
// (for the checks through /proc/self/fd) where the kernel has it.
const opScript = `set -u
rec() { printf '%s=%s\0' "$1" "$2" >&2; }
die() { rec error "$2"; exit "$1"; }
lim=${SBX_LIMIT:-33554432}
if ! cd -P -- "$SBX_BASE" 2>/dev/null; then
  if [ -n "${SBX_PIN:-}" ] || { [ -n "${SBX_PINFILE:-}" ] && { [ -e "$SBX_PINFILE" ] || [ -L "$SBX_PINFILE" ]; }; }; then
    # A concurrent first call may have created the workspace and its pin
    # since the cd above: look once more (the pin check below still
    # refuses a replaced one).
    cd -P -- "$SBX_BASE" 2>/dev/null || die 106 "the workspace directory is gone"
  else
    mkdir -p -- "$SBX_BASE" 2>/dev/null
    cd -P -- "$SBX_BASE" 2>/dev/null || die 70 "workspace directory is unusable"
  fi
fi
pbase=$PWD
ppath=${SBX_PINPATH:-}
# savepin writes the pin file: the workspace's identity and its physical
# path, written aside and renamed, so that a concurrent first call never
# reads a pin file that is created but not yet written.
savepin() {
  { printf '%s\n%s\n' "$1" "$pbase" > "$SBX_PINFILE.$$" && mv -f -- "$SBX_PINFILE.$$" "$SBX_PINFILE"; } 2>/dev/null || { rm -f -- "$SBX_PINFILE.$$" 2>/dev/null; rec warning "cannot persist the workspace pin"; }
}
# repin accepts a workspace recreated since it was pinned (its identity $1
# differs from the pin) when it is a plain directory, not a symbolic link,
# owned by the sandbox user, at the physical path the pin was taken at (or
# at SBX_BASE itself when the pin does not say): then it is pinned anew.
repin() {
  why="the workspace directory was replaced"
  case $1 in ''|*[!0-9-]*) return 1;; esac
  if [ -L "$SBX_BASE" ]; then why="$why by a symbolic link"; return 1; fi
  if [ ! -d "$pbase" ] || [ ! -O "$pbase" ]; then why="$why by a directory the sandbox user does not own"; return 1; fi
  if [ -z "$ppath" ] && [ -n "${SBX_PINFILE:-}" ] && [ -f "$SBX_PINFILE" ] && [ ! -L "$SBX_PINFILE" ]; then
    { IFS= read -r _; IFS= read -r ppath || :; } < "$SBX_PINFILE" 2>/dev/null || :
  fi
  [ -n "$ppath" ] || ppath=$SBX_BASE
  if [ "$pbase" != "$ppath" ]; then why="$why by a directory elsewhere"; return 1; fi
  [ -z "${SBX_PINFILE:-}" ] || savepin "$1"
  rec repin "$1"
  return 0
}
late=
if [ -n "${SBX_PIN:-}" ] && [ "$SBX_OP" = read ]; then
  # A read checks the pin in the same find that checks the opened file.
  late=1
  rec pbase "$pbase"
else
  id=$(find . -maxdepth 0 -printf '%D-%i' 2>/dev/null)
  case $id in ''|*[!0-9-]*) die 70 "cannot identify the workspace directory";; esac
  pin=${SBX_PIN:-}
  if [ -z "$pin" ] && [ -n "${SBX_PINFILE:-}" ]; then
    if [ -L "$SBX_PINFILE" ] || { [ -e "$SBX_PINFILE" ] && [ ! -f "$SBX_PINFILE" ]; }; then
      die 106 "the workspace pin is not a regular file"
    elif [ -f "$SBX_PINFILE" ]; then
      { IFS= read -r pin; IFS= read -r ppath || :; } < "$SBX_PINFILE" 2>/dev/null || :
      case $pin in ''|*[!0-9-]*) die 106 "the workspace pin is corrupt";; esac
    else
      pin=$id
      savepin "$id"
    fi
  fi
  [ -z "$pin" ] || [ "$id" = "$pin" ] || repin "$id" || die 106 "$why"
  rec pin "$id"
  rec pbase "$pbase"
fi
if [ "$pbase" = / ]; then meta=/$SBX_META; else meta=$pbase/$SBX_META; fi
beneath() { [ "$pbase" = / ] && return 0; case $1 in "$pbase"|"$pbase"/*) return 0;; esac; return 1; }
inmeta() { case $1 in "$meta"|"$meta"/*) return 0;; esac; return 1; }
here() { beneath "$PWD" || return 103; inmeta "$PWD" && return 103; return 0; }
create=
step() {
  if [ ! -e "$1" ] && [ ! -L "$1" ]; then
    [ -n "$create" ] || return 100
    # Another writer may create it meanwhile: its mkdir failing is fine.
    mkdir -- "$1" 2>/dev/null
  fi
  if [ -d "$1" ]; then cd -P -- "$1" 2>/dev/null || return 104
  elif [ -L "$1" ]; then if [ -n "$create" ]; then return 103; fi; return 100
  elif [ -e "$1" ]; then return 102
  else return 100; fi
  here
}
resolve() {
  case $SBX_PATH in
  .) name=.; return 0 ;;
  */*) rest=${SBX_PATH%/*}; name=${SBX_PATH##*/} ;;
  *) rest=; name=$SBX_PATH ;;
  esac
  while [ -n "$rest" ]; do
    c=${rest%%/*}
    case $rest in */*) rest=${rest#*/} ;; *) rest= ;; esac
    step "$c" || return "$?"
  done
  hops=0
  while [ "$name" != . ] && [ -L "$name" ]; do
    hops=$((hops + 1)); [ "$hops" -le 40 ] || return 103
    if [ -d "$name" ]; then
      cd -P -- "$name" 2>/dev/null || return 104
      name=.
      here || return "$?"
      break
    fi
    l=$(readlink -- "$name" 2>/dev/null) || return 100
    [ -n "$l" ] || return 100
    while :; do case $l in //*) l=${l#/} ;; ?*/) l=${l%/} ;; *) break ;; esac; done
    case $l in
    /) ld=/; name=. ;;
    */*) ld=${l%/*}; [ -n "$ld" ] || ld=/; name=${l##*/} ;;
    *) ld=.; name=$l ;;
    esac
    case $name in .|..) ld=$ld/$name; name=. ;; esac
    cd -P -- "$ld" 2>/dev/null || { [ -n "$create" ] && return 103; return 100; }
    here || return "$?"
  done
  if [ "$PWD" = "$pbase" ] && [ "$name" = "$SBX_META" ]; then return 103; fi
  return 0
}
intodir() {
  [ "$name" = . ] && return 0
  [ -d "$name" ] || { [ -e "$name" ] && return 102; return 100; }
  cd -P -- "$name" 2>/dev/null || return 104
  name=.
  here
}
ran=
ontops() {
  om=$1 oc=$2; shift 2; on=$#
  set +f
  for x in * .[!.]* ..?*; do
    { [ -e "$x" ] || [ -L "$x" ]; } || continue
    [ "$PWD" = "$pbase" ] && [ "$x" = "$SBX_META" ] && continue
    set -- "$@" "./$x"
  done
  set -f
  [ "$#" -gt "$on" ] || return 0
  ran=1
  if [ "$om" = pre ]; then
    while [ "$on" -gt 0 ]; do set -- "$@" "$1"; shift; on=$((on - 1)); done
  fi
  "$oc" "$@"
}
prove() {
  pn=$(cd -P -- "$pbase" && ontops pre find -type f -links +1 -printf '%D-%i\n' 2>/dev/null | grep -c -x -F -e "${1%-*-*}")
  [ "$pn" = "$2" ]
}
index() {
  for x in "$meta" "$meta/$1"; do
    if [ -L "$x" ] || { [ -e "$x" ] && [ ! -d "$x" ]; }; then rm -f -- "$x" 2>/dev/null; fi
    [ -d "$x" ] || mkdir -- "$x" 2>/dev/null
    { [ -w "$x" ] && [ -x "$x" ]; } || chmod u+rwx -- "$x" 2>/dev/null
  done
  [ -d "$meta/$1" ] && [ ! -L "$meta" ] && [ ! -L "$meta/$1" ]
}
marks() {
  if [ -d "$meta/binary" ] && [ ! -L "$meta" ] && [ ! -L "$meta/binary" ]; then
    find "$meta/binary" -mindepth 1 -maxdepth 1 -type f -printf 'mark=%f\0' >&2 2>/dev/null
  fi
}
regular() {
  [ "$name" = . ] && return 101
  [ -e "$name" ] || return 100
  [ -d "$name" ] && return 101
  [ -f "$name" ] || return 107
  return 0
}
openv() {
  if [ -n "$late" ]; then set -- "$pbase"; else set --; fi
  if [ -n "$proc" ]; then
    # "command" keeps a failed open from ending the shell (a redirection
    # error on the special builtin exec does, with status 2), so a file
    # swapped away meanwhile is an answer, not a crashed helper.
    { command exec 3< "./$name"; } 2>/dev/null || return 104
    set -- "$@" /proc/self/fd/3
  fi
  st=$(find "$@" "./$name" -maxdepth 0 -printf '%y %n %D-%i-%s-%T@ %s %D-%i %l//' 2>/dev/null)
  if [ -n "$late" ]; then
    fp=${st%%//*}; st=${st#*//}
    set -- $fp
    if [ "${5:-}" != "$SBX_PIN" ]; then repin "${5:-}" || die 106 "$why"; rec pin "${5:-}"; fi
  fi
  if [ -n "$proc" ]; then
    fp=${st%%//*}; fp=${fp#* * * * * }; st=${st#*//}
    if [ "$PWD" = / ]; then want=/$name; else want=$PWD/$name; fi
    [ "$fp" = "$want" ] || return 103
  fi
  set -- $st
  [ "${1:-}" = f ] || return 103
  links=$2 key=$3 size=$4
}
# latepin makes a read's pin check (otherwise made with the opened file's,
# see openv) before the read reports that its file cannot be reached, so
# that a replaced workspace is reported as such, not as a missing file.
latepin() {
  [ -n "$late" ] || return 0
  set -- $(find "$pbase" -maxdepth 0 -printf '%D-%i' 2>/dev/null)
  if [ "${1:-}" != "$SBX_PIN" ]; then repin "${1:-}" || die 106 "$why"; rec pin "$1"; fi
  late=
}
marked() { [ -n "$1" ] && [ ! -L "$meta" ] && [ ! -L "$meta/binary" ] && [ -f "$meta/binary/$1" ]; }
proc=
[ -d /proc/self/fd ] && proc=1
set -f
case $SBX_OP in
pin)
  exit 0 ;;
read)
  resolve || { c=$?; latepin; die "$c" "cannot be reached"; }
  regular || { c=$?; latepin; die "$c" "not a regular file"; }
  [ -r "$name" ] || { latepin; die 104 "permission denied"; }
  openv || die "$?" "changed while it was being opened"
  [ "$links" -gt 1 ] && ! prove "$key" "$links" && die 108 "has other hard links"
  window=
  if [ "$size" -gt "$lim" ]; then
    [ "${SBX_LINES:-}" = 1 ] || die 109 "too large"
    window=1
  fi
  if marked "$key"; then
    [ "${SBX_TEXT:-}" = 1 ] && die 105 "binary"
    rec binary 1
  fi
  if [ -n "$window" ]; then
    # A line window of a file larger than the cap: only the window's
    # lines are sent (at most the cap and a byte), then the line count
    # (newlines, and one more for a last line without one), read from the
    # open file again through /proc when there is one.
    if [ -n "$proc" ]; then src=/proc/self/fd/3; else src=./$name; fi
    tail -n "+${SBX_FROM:-1}" < "$src" 2>/dev/null | head -n "${SBX_COUNT:-2000}" | head -c "$((lim + 1))"
    n=$(wc -l < "$src" 2>/dev/null) || die 104 "cannot be read"
    n=$((n + 0))
    [ "$(tail -c 1 < "$src" | wc -l)" -eq 0 ] && n=$((n + 1))
    rec window 1
    rec lines "$n"
    exit 0
  fi
  if [ -n "$proc" ]; then exec head -c "$((lim + 1))" <&3; fi
  exec head -c "$((lim + 1))" -- "./$name" ;;
write)
  create=1
  resolve || die "$?" "cannot be reached"
  [ "$name" = . ] && die 101 "is a directory"
  if [ -e "$name" ] || [ -L "$name" ]; then
    regular || die "$?" "not a regular file"
    [ -w "$name" ] || die 104 "permission denied"
  elif [ -n "$proc" ]; then
    # A new file is created exclusively (O_EXCL follows no link). The
    # redirection is on "command :", not ":": a failed redirection on a
    # special builtin ends a POSIX shell (dash exits 2), and a name made
    # meanwhile is an answer, not a crashed helper.
    set -C
    { command : > "./$name"; } 2>/dev/null || die 103 "changed while it was being opened"
    set +C
  fi
  if [ -n "$proc" ]; then
    # Opened without truncation, then checked like a read's file before
    # a byte changes; truncated and written through the open file.
    { command exec 4<> "./$name"; } 2>/dev/null || die 104 "cannot open"
    st=$(find /proc/self/fd/4 "./$name" -maxdepth 0 -printf '%y %n %D-%i-%s-%T@ %l//' 2>/dev/null)
    fp=${st%%//*}; fp=${fp#* * * }; st=${st#*//}
    if [ "$PWD" = / ]; then want=/$name; else want=$PWD/$name; fi
    [ "$fp" = "$want" ] || die 103 "changed while it was being opened"
  else
    st=$(find "./$name" -maxdepth 0 -printf '%y %n %D-%i-%s-%T@ //' 2>/dev/null)
  fi
  old=
  set -- $st
  if [ "$#" -gt 0 ]; then
    [ "$1" = f ] || die 103 "changed while it was being opened"
    [ "$2" -gt 1 ] && ! prove "$3" "$2" && die 108 "has other hard links"
    old=$3
  fi
  if [ -n "$proc" ]; then
    msg=$( { command : > /proc/self/fd/4 && cat >&4; } 2>&1) || die 110 "$msg"
  else
    cat > "./$name" 2>/dev/null || die 110 "the write failed"
  fi
  if [ "${SBX_BINARY:-}" = 1 ]; then
    set -- $(find "./$name" -maxdepth 0 -printf '%y %n %D-%i-%s-%T@' 2>/dev/null)
    if [ "${1:-}" = f ] && index binary; then
      k=$meta/binary/$3
      if [ -e "$k" ] && [ ! -f "$k" ]; then rm -rf -- "$k" 2>/dev/null; fi
      { command : > "$k"; } 2>/dev/null || rec warning "cannot record the binary mark"
    else
      rec warning "cannot record the binary mark"
    fi
  fi
  if marked "$old"; then rm -f -- "$meta/binary/$old" 2>/dev/null; fi
  exit 0 ;;
remove)
  # Only the parent is walked (step by step, as every operation does);
  # the last element is never followed: a symbolic link is removed
  # itself, relative to the parent the shell stands in, whatever its
  # path names meanwhile. A directory is refused (rm without -r).
  case $SBX_PATH in
  .) die 101 "is the workspace directory" ;;
  */*) rest=${SBX_PATH%/*}; name=${SBX_PATH##*/} ;;
  *) rest=; name=$SBX_PATH ;;
  esac
  while [ -n "$rest" ]; do
    c=${rest%%/*}
    case $rest in */*) rest=${rest#*/} ;; *) rest= ;; esac
    step "$c" || die "$?" "cannot be reached"
  done
  here || die "$?" "cannot be reached"
  if [ "$PWD" = "$pbase" ] && [ "$name" = "$SBX_META" ]; then die 103 "cannot be reached"; fi
  if [ -L "$name" ]; then :
  elif [ -d "$name" ]; then die 101 "is a directory"
  elif [ ! -e "$name" ]; then die 100 "not found"
  fi
  msg=$(rm -f -- "./$name" 2>&1) || { [ -d "$name" ] && [ ! -L "$name" ] && die 101 "is a directory"; die 104 "$msg"; }
  exit 0 ;;
ls|walk)
  resolve || die "$?" "cannot be reached"
  intodir || die "$?" "not a directory"
  { [ -r . ] && [ -x . ]; } || die 104 "permission denied"
  if [ "$SBX_OP" = ls ]; then
    ontops pre find -maxdepth 0 -printf '%y%Y %s %T@ %p\0' 2>/dev/null
  else
    # A directory that cannot be opened is listed, then marked "!d" so
    # that its missing content is reported, not silently left out.
    ontops pre find -printf '%y%Y %s %T@ %p\0' \( -type d ! \( -readable -executable \) -printf '!d 0 0 %p\0' -prune \) 2>/dev/null
  fi
  exit 0 ;;
grep)
  resolve || die "$?" "cannot be reached"
  # A regular expression runs with -P (PCRE, which reads RE2's
  # constructs alike) where grep has it, else -E; a literal with -F.
  mode=-F
  if [ "${SBX_REGEX:-}" = 1 ]; then
    mode=-E
    grep -P -e x -- /dev/null >/dev/null 2>&1
    [ $? -eq 1 ] && mode=-P
  fi
  set -- -H -n -I "$mode" --null --devices=skip
  [ "${SBX_MAX:-0}" -gt 0 ] && set -- "$@" -m "$SBX_MAX"
  [ "${SBX_ICASE:-}" = 1 ] && set -- "$@" -i
  [ "${SBX_BEFORE:-0}" -gt 0 ] && set -- "$@" -B "$SBX_BEFORE"
  [ "${SBX_AFTER:-0}" -gt 0 ] && set -- "$@" -A "$SBX_AFTER"
  if [ "${SBX_BEFORE:-0}" -gt 0 ] || [ "${SBX_AFTER:-0}" -gt 0 ]; then set -- "$@" --no-group-separator; fi
  if [ "$name" != . ] && [ -e "$name" ] && [ ! -d "$name" ]; then
    rec kind file
    regular || die "$?" "not a regular file"
    [ -r "$name" ] || die 104 "permission denied"
    marks
    g=$*
    openv || die "$?" "changed while it was being opened"
    rec f "$links $size $key ./$name"
    if [ "$links" -gt 1 ] || [ "$size" -gt "$lim" ]; then exit 0; fi
    if [ -n "$proc" ]; then
      grep $g -e "$SBX_PATTERN" <&3 2>/dev/null
    else
      grep $g -e "$SBX_PATTERN" -- "./$name" 2>/dev/null
    fi
    [ $? -le 2 ] || die 73 "grep failed"
    exit 0
  fi
  intodir || die "$?" "not found"
  { [ -r . ] && [ -x . ]; } || die 104 "permission denied"
  rec kind dir
  # u= records name what grep cannot read (a file, or a directory it
  # cannot open), so that it is reported rather than silently left out.
  ontops pre find \( -type d ! \( -readable -executable \) -printf 'u=d %p\0' -prune \) -o \( -type f -printf 'f=%n %s %D-%i-%s-%T@ %p\0' ! -readable -printf 'u=f %p\0' \) >&2 2>/dev/null
  marks
  # The search names "." alone: grep follows a symbolic link named on its
  # command line, so a name listed above as a directory or a file and
  # swapped for a link since would be read through. Below "." grep never
  # follows one. It reads the metadata directory too; the backend drops
  # what it finds there (no f= record names it).
  grep -r "$@" -e "$SBX_PATTERN" -- . 2>/dev/null
  [ $? -le 2 ] || die 73 "grep failed"
  exit 0 ;;
tar)
  index tmp || die 74 "cannot create the archive directory"
  f=$(mktemp "$meta/tmp/snapshot.XXXXXX" 2>/dev/null) || die 74 "cannot create the archive file"
  l=$(mktemp "$meta/tmp/skip.XXXXXX" 2>/dev/null) || { rm -f -- "$f"; die 74 "cannot create the list file"; }
  ontops pre find -type f -printf 'f=%n %s %D-%i-%s-%T@ %p\0' -size +"$lim"c -fprintf "$l" '%p\n' >&2 2>/dev/null
  marks
  ontops post tar -cf "$f" --anchored --no-wildcards --exclude-from="$l" -- 2>/dev/null
  c=$?
  rm -f -- "$l"
  # Exit 1 and 2 also report files that changed or vanished meanwhile.
  if [ -n "$ran" ] && { [ "$c" -gt 2 ] || [ ! -s "$f" ]; }; then rm -f -- "$f"; die 74 "tar failed"; fi
  rec tar "$f"
  exit 0 ;;
*)
  die 64 "unknown operation" ;;
esac
`

// Exit codes of opScript.
const (
	exitNotFound   = 100
	exitIsDir      = 101
	exitNotDir     = 102
	exitEscape     = 103
	exitDenied     = 104
	exitBinary     = 105
	exitReplaced   = 106
	exitNotRegular = 107
	exitHardLink   = 108
	exitTooLarge   = 109
	exitWrite      = 110
)
