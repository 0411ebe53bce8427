package run

import "github.com/sandboxkit/sandbox/internal/bgproc"

// The fixed POSIX sh programs this package runs in the sandbox. None of them
// is ever assembled from caller input: every variable part (paths, the
// fingerprint, the budget, the caller's argv) reaches them as positional
// arguments of `sh -c <script> <name> args...`, and the caller's environment
// as the command's environment.
//
// Files in a run directory d:
//
//	request    "<fingerprint> <hex id>": the request record of the claim,
//	           linked into place so that it is never replaced
//	run.sh     the wrapper (wrapperScript)
//	started/   the start guard: the one wrapper that creates it runs the command
//	admission  "<wrapper pid> <fingerprint>"
//	child      pid of the timeout(1) process running the command, the
//	           leader of its process group (bgproc's pid file)
//	output     the command's combined stdout and stderr
//	exit       "<exit code> [killed|timeout]" (bgproc.ParseExit; wrapper v1
//	           wrote "budget" for timeout)
//	killed     present once Kill was called
//
// Every record except output is written to a temporary file and renamed.

// prelude starts every control script: a known IFS, a PATH that finds the
// usual tools whatever the caller's environment says, and these helpers:
//
//	sk_has PID LINE   process PID's initial environment holds LINE
//	sk_pids LINE [LINE2]  pids of processes whose environment holds LINE (and LINE2)
//	sk_wrapper PID    PID is a wrapper of the run in $d: its argv[1] is
//	                  $d/run.sh (cmdline, unlike environ, can be read
//	                  whatever user runs the process)
//	sk_alive PID      PID is a live wrapper of the run (a zombie has no
//	                  cmdline)
//	sk_roots          wrappers of the run that are not forks of a wrapper
//	sk_get NAME       sets sk_v to record NAME (empty if none) with no
//	                  process: a record is one line; a second line, which
//	                  no writer makes, is kept after a space so that the
//	                  record is refused as a bad one
//	sk_nap I          sleep in the I-th round of a poll: briefly at first
//	sk_dump           print the run's state as key=value lines
//
// and bgproc.Lib's (bg_put publishes a record atomically, bg_signal
// signals a process group).
const prelude = bgproc.Lib + `IFS=' 	
'
sk_path_set=${PATH+1}
sk_path=${PATH-}
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
export PATH
sk_has() {
	tr '\000' '\n' < "/proc/$1/environ" 2>/dev/null | grep -Fqx -e "$2"
}
sk_pids() {
	for sk_f in $(grep -lF -e "$1" /proc/[0-9]*/environ 2>/dev/null); do
		sk_p=${sk_f#/proc/}
		sk_p=${sk_p%/environ}
		if sk_has "$sk_p" "$1" && { [ -z "${2-}" ] || sk_has "$sk_p" "$2"; }; then echo "$sk_p"; fi
	done
}
sk_wrapper() {
	[ "$(tr '\000' '\n' < "/proc/$1/cmdline" 2>/dev/null | sed -n 2p)" = "$d/run.sh" ]
}
sk_alive() {
	if [ -r /proc/self/cmdline ]; then
		sk_wrapper "$1"
	else
		kill -0 "$1" 2>/dev/null
	fi
}
sk_roots() {
	for sk_f in $(grep -lF -e "$d/run.sh" /proc/[0-9]*/cmdline 2>/dev/null); do
		sk_r=${sk_f#/proc/}
		sk_r=${sk_r%/cmdline}
		sk_wrapper "$sk_r" || continue
		sk_s=$(cat "/proc/$sk_r/stat" 2>/dev/null) || continue
		sk_s=${sk_s##*) }
		set -- $sk_s
		if ! sk_wrapper "$2"; then echo "$sk_r"; fi
	done
}
sk_get() {
	sk_v= sk_x=
	if [ -r "$d/$1" ]; then
		{ IFS= read -r sk_v; IFS= read -r sk_x; } 2>/dev/null < "$d/$1"
		if [ -n "$sk_x" ]; then sk_v="$sk_v $sk_x"; fi
	fi
	return 0
}
sk_nap() {
	if [ "$1" -lt 20 ]; then sleep 0.01; else sleep 0.1; fi
}
sk_dump() {
	sk_get request
	printf 'request=%s\n' "$sk_v"
	sk_get admission
	sk_a=$sk_v
	printf 'admission=%s\n' "$sk_a"
	sk_a=${sk_a%% *}
	# The wrapper writes the exit record as its last act: one there while
	# the wrapper lives is not (yet) its own; the run's code can write it.
	sk_get exit
	sk_e=$sk_v
	if [ -n "$sk_e" ] && { [ -z "$sk_a" ] || ! sk_alive "$sk_a"; }; then
		printf 'exit=%s\n' "$sk_e"
		return 0
	fi
	if [ -d "$d/started" ]; then echo started=1; fi
	if [ -n "$sk_a" ]; then
		if sk_alive "$sk_a"; then
			echo alive=1
			echo exit=
			return 0
		fi
	elif [ -d "$d/started" ]; then
		printf 'roots=%s\n' "$(sk_roots | tr '\n' ' ')"
	fi
	# The process may have exited since the exit record was first read.
	sk_get exit
	printf 'exit=%s\n' "$sk_v"
}
`

// wrapperScript runs one admitted command and records its outcome. It is
// written to the run directory as run.sh and started detached, as
//
//	setsid sh DIR/run.sh DIR TOKEN FP BUDGET WORKDIR PATHSET PATH argv...
//
// so that argv[1] of the wrapper, and of no other process, is DIR/run.sh.
// The command's processes get SANDBOXKIT_RUN=TOKEN and SANDBOXKIT_RUN_DIR=DIR
// in their environment, which together find them for Kill.
const wrapperScript = `# sandboxkit run wrapper v2: runs one admitted command and records its outcome.
IFS=' 	
'
d=$1 tok=$2 fp=$3 budget=$4 workdir=$5 upath_set=$6 upath=$7
shift 7
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
export PATH
# The start guard: exactly one wrapper ever runs the command of a run.
mkdir "$d/started" 2>/dev/null || exit 0
` + bgproc.Lib + `bg_put "$d/admission" "$$ $fp"
if [ -e "$d/killed" ]; then
	bg_put "$d/exit" "137 killed"
	exit 137
fi
bg_pre() {
	SANDBOXKIT_RUN=$tok
	SANDBOXKIT_RUN_DIR=$d
	export SANDBOXKIT_RUN SANDBOXKIT_RUN_DIR
	cd "$workdir" || exit 126
	if [ "$upath_set" = 1 ]; then PATH=$upath; export PATH; else unset PATH; fi
}
# At the budget, TERM to the command's process group, KILL 10 s later.
bg_start "$d/child" TERM 10 "$budget" "$@" < /dev/null >> "$d/output" 2>&1
bg_wait
reason=$bg_why
if [ -e "$d/killed" ]; then reason=killed; fi
bg_put "$d/exit" "$bg_rc $reason"
exit "$bg_rc"
`

// admitScript claims a run and launches its wrapper, or finds the run
// already admitted. Arguments: DIR TOKEN FP IDHEX BUDGET WORKDIR MODE
// WRAPPER argv... MODE is "start", or "reconcile" after a start whose
// outcome is unknown: then it first waits briefly for the evidence of the
// original launch rather than launching again. It kills wrapper processes
// of the run other than the admitted one, and prints the state (sk_dump);
// or nodir=1 when WORKDIR is not a directory, or error=... when the sandbox
// lacks a required tool.
const admitScript = prelude + `d=$1 tok=$2 fp=$3 idhex=$4 budget=$5 workdir=$6 mode=$7 wrapper=$8
shift 8
if ! command -v timeout > /dev/null 2>&1; then
	echo 'error=the sandbox has no timeout command'
	exit 0
fi
if [ ! -d "$workdir" ]; then
	echo nodir=1
	exit 0
fi
# The runs' records (output included) are for the sandbox's user alone.
(umask 077 && mkdir -p "${d%/*}") || exit 1
# The claim. A run directory that exists already is never erased: its
# records decide.
mkdir "$d" 2>/dev/null || [ -d "$d" ] || exit 1
if [ ! -e "$d/request" ]; then
	# Publish without replacing: with two claimants, the first link wins.
	printf '%s %s\n' "$fp" "$idhex" > "$d/request.tmp.$$" &&
		ln "$d/request.tmp.$$" "$d/request" 2>/dev/null
	rm -f "$d/request.tmp.$$"
fi
if [ ! -s "$d/request" ]; then
	echo "cannot write the request record in $d" >&2
	exit 1
fi
sk_get request
if [ "$sk_v" != "$fp $idhex" ]; then
	sk_dump
	exit 0
fi
if [ ! -e "$d/run.sh" ]; then
	printf '%s' "$wrapper" > "$d/run.sh.tmp.$$" && mv -f "$d/run.sh.tmp.$$" "$d/run.sh"
fi
if [ "$mode" = reconcile ]; then
	i=0
	while [ ! -d "$d/started" ] && [ ! -e "$d/exit" ] && [ "$i" -lt 20 ]; do
		sleep 0.05
		i=$((i + 1))
	done
fi
if [ ! -d "$d/started" ] && [ ! -e "$d/exit" ]; then
	detach=
	if command -v setsid > /dev/null 2>&1; then
		detach=setsid
	elif command -v nohup > /dev/null 2>&1; then
		detach=nohup
	fi
	# Start the wrapper from a subshell that exits at once, so that the
	# wrapper is no descendant of this script: a provider that ends this
	# script's process tree (say, when the caller's context ends) leaves
	# the run alone. setsid puts it out of this script's session and
	# process group too.
	(
		cd / || exit 1
		$detach sh "$d/run.sh" "$d" "$tok" "$fp" "$budget" "$workdir" "$sk_path_set" "$sk_path" "$@" &
	) < /dev/null > /dev/null 2>&1
fi
i=0
while [ ! -e "$d/admission" ] && [ ! -e "$d/exit" ] && [ "$i" -lt 70 ]; do
	sk_nap "$i"
	i=$((i + 1))
done
# Any wrapper but the admitted one is a duplicate: end it. Only an
# admission record of this request ("<pid> <fingerprint>") names the one
# to keep; on any other record nothing is killed (the caller refuses it).
sk_get admission
a=$sk_v
pid=
if [ "$a" = "${a%% *} $fp" ]; then pid=${a%% *}; fi
case $pid in
0* | *[!0-9]*) pid= ;;
esac
if [ -n "$pid" ]; then
	for p in $(sk_roots); do
		if [ "$p" != "$pid" ]; then kill -KILL "$p" 2>/dev/null; fi
	done
fi
sk_dump
`

// statusScript prints the state of a run (sk_dump), or missing=1.
// Arguments: DIR TOKEN.
const statusScript = prelude + `d=$1 tok=$2
if [ ! -e "$d/request" ]; then
	echo missing=1
	exit 0
fi
sk_dump
`

// killScript ends a run: it sends SIGTERM to the command's processes, then
// SIGKILL after GRACE seconds, and waits for the wrapper to record the exit.
// A run that never started is marked killed without running; a wrapper that
// does not finish is killed and the exit is recorded for it. A run that is
// already gone without an exit record stays lost. Arguments: DIR TOKEN GRACE.
const killScript = prelude + `d=$1 tok=$2 grace=$3
# A run's processes are those with its id and its directory: a run of the
# same id in another sandbox whose processes this one can see (a host
# runtime, local without a pid namespace) has another directory.
runmark="SANDBOXKIT_RUN=$tok"
dirmark="SANDBOXKIT_RUN_DIR=$d"
if [ ! -e "$d/request" ]; then
	echo missing=1
	exit 0
fi
sk_get admission
pid=${sk_v%% *}
if [ -e "$d/exit" ] && { [ -z "$pid" ] || ! sk_alive "$pid"; }; then
	# The run ended; what it left running goes.
	for p in $(sk_pids "$runmark" "$dirmark"); do kill -KILL "$p" 2>/dev/null; done
	sk_dump
	exit 0
fi
: > "$d/killed"
if mkdir "$d/started" 2>/dev/null; then
	# No wrapper ever started, and none will: record the kill.
	bg_put "$d/exit" "137 killed"
	sk_dump
	exit 0
fi
i=0
while [ ! -e "$d/admission" ] && [ ! -e "$d/exit" ] && [ "$i" -lt 70 ]; do
	sk_nap "$i"
	i=$((i + 1))
done
sk_get admission
pid=${sk_v%% *}
sig=TERM
i=0
# While the wrapper lives the run does, whatever exit record is there.
while [ -n "$pid" ] && sk_alive "$pid"; do
	for p in $(sk_pids "$runmark" "$dirmark"); do kill -s "$sig" "$p" 2>/dev/null; done
	bg_signal "$d/child" "$sig"
	i=$((i + 1))
	if [ "$i" -ge $((grace * 10)) ]; then sig=KILL; fi
	if [ "$i" -ge $((grace * 10 + 30)) ]; then break; fi
	sleep 0.1
done
if [ -n "$pid" ] && sk_alive "$pid"; then
	kill -KILL "$pid" 2>/dev/null
	bg_put "$d/exit" "137 killed"
fi
for p in $(sk_pids "$runmark" "$dirmark"); do kill -KILL "$p" 2>/dev/null; done
sk_dump
`

// readScript prints a header line, 1 or 0 (whether the exit record existed
// before the read, so the bytes that follow are final), then up to MAX
// bytes of output from byte OFFSET: one read of the file, so the caller
// counts the raw bytes it got (the output reaches it unredacted). Two
// processes, whatever the output. Arguments: DIR OFFSET MAX.
const readScript = prelude + `d=$1 off=$2 max=$3
if [ ! -e "$d/request" ]; then
	echo missing
	exit 0
fi
if [ -e "$d/exit" ]; then echo 1; else echo 0; fi
if [ -e "$d/output" ]; then
	tail -c "+$((off + 1))" "$d/output" | head -c "$max"
fi
`

// tailScript prints the last MAX bytes of output. Arguments: DIR MAX.
const tailScript = prelude + `d=$1 max=$2
if [ ! -e "$d/request" ]; then
	echo missing
	exit 0
fi
echo ok
if [ -e "$d/output" ]; then tail -c "$max" "$d/output"; fi
`

// listScript prints, for every run directory under ROOT, its name and the
// first line of its request record (at most 9000 bytes: a fingerprint and
// the hex of an id of at most MaxIDLen bytes), one a line. Arguments: ROOT.
const listScript = prelude + `for f in "$1"/*/request; do
	[ -r "$f" ] || continue
	n=${f%/request}
	printf '%s ' "${n##*/}"
	head -c 9000 "$f" | head -n 1
	echo
done
`
