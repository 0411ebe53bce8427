package interp

// kernelMarker is the environment variable every kernel process, and every
// process a cell starts, inherits: its value names the kernel, so that
// killing the kernel finds the processes a cell started even when they
// left its process group and session.
const kernelMarker = "SANDBOXKIT_INTERP_KERNEL"

// The fixed POSIX sh programs this package runs in the sandbox. None is
// assembled from caller input: paths and numbers reach them as positional
// arguments of `sh -c <script> <name> args...`, the kernel's source on
// stdin, and a cell's request as an argument. The client (runScript) uses
// shell builtins only on its fast path, since starting a program is the
// slow part of a command in a sandbox (about 100 ms per program in the
// local provider's L4 sandboxes on a loaded host).
//
// Files in a kernel directory d (created readable by the sandbox's user only):
//
//	in          FIFO the kernel reads request numbers from, one per line
//	out         FIFO of wake-ups: "N out", "N done", "N tick", "0 ready",
//	            "0 dead"; written only while a client holds it open
//	group       pid of the monitor, which leads the kernel's process group
//	ready       "<kernel pid>", published once the kernel listens
//	dead        present once the kernel exited
//	log         the kernel process's own stdout and stderr
//	req/N       request N: a JSON header line, then the cell's code
//	ev/N        request N's events, JSON lines, appended by the kernel
//	ev/N.done   the size of ev/N, written once ev/N is complete
//	running     "N" while request N's cell runs

const prelude = `IFS=' 	
'
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
export PATH
`

// launchScript stores the kernel program (read from stdin) under its
// content hash unless it is there already, then starts a kernel detached
// from this command under a monitor sh (which reaps it and reports its
// end), and waits until it listens. Arguments: BASE KID FILE LANG. It
// prints "ok PID", or "error=..." for a missing interpreter, or "failed"
// followed by the end of the kernel's log.
const launchScript = prelude + `base=$1 kid=$2 file=$3 lang=$4
d=$base/$kid
case $lang in
python) prog=$(command -v python3) || { cat > /dev/null; echo 'error=python3 is not installed in the sandbox'; exit 0; } ;;
bash) prog=$(command -v bash) || { cat > /dev/null; echo 'error=bash is not installed in the sandbox'; exit 0; } ;;
node) prog=$(command -v node) || { cat > /dev/null; echo 'error=node is not installed in the sandbox'; exit 0; } ;;
*) cat > /dev/null; echo "error=unknown language"; exit 0 ;;
esac
(umask 077 && mkdir -p "$base") || exit 1
# The program is written afresh into the kernel's own new directory: a
# copy shared between starts could be replaced by a cell, and the next
# start (a restart that promises a clean state) would run the cell's code.
(umask 077 && mkdir "$d" && mkdir "$d/req" "$d/ev" && mkfifo "$d/in" "$d/out" && cat > "$d/$file") || exit 1
exec 4<> "$d/out"
detach=
if command -v setsid > /dev/null 2>&1; then
	detach=setsid
elif command -v nohup > /dev/null 2>&1; then
	detach=nohup
fi
# A command started with & by a non-interactive shell ignores SIGINT, and
# a shell cannot trap a signal ignored at its start: the kernel gets it back.
dflt=
if env --default-signal=INT true > /dev/null 2>&1; then dflt='env --default-signal=INT'; fi
# Started from a subshell that exits at once, so that the monitor is no
# descendant of this command: a provider that ends this command's process
# tree leaves it alone.
(
	MPLBACKEND=Agg PYTHONIOENCODING=utf-8 PYTHONDONTWRITEBYTECODE=1
	` + kernelMarker + `=$kid
	export MPLBACKEND PYTHONIOENCODING PYTHONDONTWRITEBYTECODE ` + kernelMarker + `
	$detach sh -c 'd=$1
		shift
		echo $$ > "$d/group"
		"$@" "$d" < /dev/null >> "$d/log" 2>&1
		: > "$d/dead"
		printf "0 dead\n" 1<> "$d/out"' sandboxkit-interp-monitor "$d" $dflt "$prog" "$d/$file" &
) < /dev/null > /dev/null 2>&1 4>&-
while [ ! -e "$d/ready" ] && [ ! -e "$d/dead" ]; do
	IFS=' ' read -r m w <&4 || break
done
if [ -e "$d/ready" ]; then
	IFS= read -r pid < "$d/ready"
	IFS= read -r g < "$d/group"
	echo "ok $pid $g"
else
	echo failed
	tail -c 4000 "$d/log" 2>/dev/null
fi
`

// runScript submits request N (when SUBMIT is 1; REQ holds it, or else
// it was written to req/N already) unless it was submitted already, then waits for news of it, and prints a status
// line "STATE SIZE" (STATE: done, run or dead; SIZE: the final size of
// ev/N when done) followed by at most MAX bytes of ev/N from byte OFF on.
// It returns when the request is done, the kernel is dead, the kernel
// reports new output, a tick of the kernel's clock (once a second) finds
// events past OFF, or after TICKS ticks.
// Arguments: D N OFF MAX TICKS SUBMIT [REQ].
const runScript = prelude + `d=$1 n=$2 off=$3 max=$4 ticks=$5 submit=$6
ev=$d/ev/$n
if [ ! -p "$d/out" ] || [ -e "$d/dead" ]; then
	echo 'dead 0'
	exit 0
fi
exec 4<> "$d/out"
# The monitor reports the kernel's end, unless it is gone too (a sandbox
# resumed without its memory): then the kernel's pid tells.
IFS= read -r kp < "$d/ready" || kp=
if [ -z "$kp" ] || ! kill -0 "$kp" 2>/dev/null; then
	if [ -e "$ev.done" ]; then IFS= read -r sz < "$ev.done"; echo "done $sz"; else echo 'dead 0'; fi
	[ ! -e "$ev.done" ] || tail -c +$((off + 1)) "$ev" | head -c "$max"
	exit 0
fi
if [ "$submit" = 1 ] && [ ! -e "$ev" ]; then
	if [ "$#" -ge 7 ]; then
		# Without clobbering: a submission may be retried.
		set -C
		printf '%s' "$7" 2>/dev/null > "$d/req/$n"
		set +C
	fi
	printf '%s\n' "$n" 1<> "$d/in"
fi
i=0 st=
while :; do
	if [ -e "$ev.done" ]; then st=done; break; fi
	if [ -e "$d/dead" ] || [ ! -d "$d" ]; then
		if [ -e "$ev.done" ]; then st=done; else st=dead; fi
		break
	fi
	if [ "$i" -ge "$ticks" ]; then st=run; break; fi
	IFS=' ' read -r m w <&4 || { st=run; break; }
	case $m.$w in
	"$n.out") st=run; break ;;
	*.tick)
		i=$((i + 1))
		# A kernel busy in a cell cannot announce what it wrote before (a
		# Node cell's loop holds its only thread): new events end the wait
		# as its wake-up would have.
		if [ "$off" = 0 ]; then
			if [ -s "$ev" ]; then st=run; break; fi
		elif sz=$(wc -c < "$ev" 2> /dev/null) && [ ${sz:-0} -gt "$off" ]; then
			st=run
			break
		fi
		;;
	esac
done
sz=0
if [ "$st" = done ]; then IFS= read -r sz < "$ev.done"; fi
echo "$st $sz"
if [ "$st" = done ] && [ "$off" = 0 ] && [ "$sz" -le 16384 ]; then
	# Small and complete: read with builtins, as lines.
	while IFS= read -r l; do printf '%s\n' "$l"; done < "$ev"
elif [ -e "$ev" ]; then
	tail -c +$((off + 1)) "$ev" | head -c "$max"
fi
`

// interruptScript sends SIGINT to the kernel's process group when
// request N runs, and then prints "sent". G is the group's pid as the
// launcher reported it (the file in D is writable by cells); when empty,
// the file is read. Arguments: D N [G].
const interruptScript = prelude + `d=$1 n=$2 g=$3
case $g in ''|*[!0-9]*) IFS= read -r g < "$d/group" || exit 0 ;; esac
case $g in ''|*[!0-9]*) exit 0 ;; esac
IFS= read -r r < "$d/running" || exit 0
if [ "$r" = "$n" ]; then
	# The cell's commands get the signal too, as from a terminal's Ctrl-C.
	# The monitor ignores it.
	kill -INT "-$g" 2>/dev/null && echo sent
fi
exit 0
`

// outputScript prints, in base64 on one line each, the first MAX bytes of
// the files a Bash kernel collects a cell's stdout and stderr in (MAX -1:
// all of them). Arguments: D MAX.
const outputScript = prelude + `d=$1 max=$2
for f in o e; do
	if [ ! -s "$d/$f" ]; then echo; continue; fi
	if [ "$max" -ge 0 ]; then head -c "$max" "$d/$f"; else cat "$d/$f"; fi | base64 | tr -d '\n'
	echo
done
`

// stopScript ends the kernel and every process it started, then reports
// the kernel dead to its clients and removes its directory. A cell may
// have started processes that left the kernel's process group and session
// (setsid) or whose parent exited: they are found by the marker variable
// every process the kernel starts inherits in its environment
// (kernelMarker=KID), by the session and process group the monitor leads
// (pid G), and by descent from any process found. Found processes are
// stopped first, so that none can fork past the sweep, then killed; sweeps
// repeat until none is left or a bounded number of rounds is spent. The
// wake-up to the clients is written from a job of its own, since a hostile
// cell may have filled the FIFO. It prints "ok", or "alive PIDS" when some
// of the kernel's processes survived. Arguments: D KID G (G may be empty).
const stopScript = prelude + `d=$1 kid=$2 g=$3
case $g in ''|*[!0-9]*)
	g=
	if [ -r "$d/group" ]; then IFS= read -r g < "$d/group"; fi
	case $g in ''|*[!0-9]*) g= ;; esac ;;
esac
[ ! -d "$d" ] || : > "$d/dead" 2>/dev/null
me=$$
found=
# sweep sets found to the pids of the kernel's live processes.
sweep() {
	found=' '
	if [ -n "$kid" ]; then
		for f in $(grep -l -a -F -e "` + kernelMarker + `=$kid" /proc/[0-9]*/environ 2>/dev/null); do
			p=${f#/proc/}
			found="$found${p%/environ} "
		done
	fi
	table=
	for s in /proc/[0-9]*/stat; do
		l=
		IFS= read -r l < "$s" 2>/dev/null || [ -n "$l" ] || continue
		p=${s#/proc/}
		p=${p%/stat}
		set -- ${l##*) }
		[ "$#" -ge 4 ] || continue
		[ "$1" != Z ] && [ "$1" != X ] || continue
		table="$table$p $2
"
		if [ -n "$g" ] && { [ "$p" = "$g" ] || [ "$3" = "$g" ] || [ "$4" = "$g" ]; }; then
			found="$found$p "
		fi
	done
	more=1
	while [ "$more" = 1 ]; do
		more=0
		while read -r p pp; do
			[ -n "$p" ] || continue
			case $found in *" $p "*) continue ;; esac
			case $found in *" $pp "*) found="$found$p " more=1 ;; esac
		done <<EOF
$table
EOF
	done
	live=' '
	for p in $found; do
		[ "$p" != "$me" ] && [ -d "/proc/$p" ] && live="$live$p "
	done
	found=$live
}
i=0
while [ "$i" -lt 20 ]; do
	sweep
	[ "$found" != ' ' ] || break
	# Stopped, a process cannot fork; the second sweep finds what the
	# first one's processes started meanwhile.
	kill -STOP $found 2>/dev/null
	all=$found
	sweep
	kill -STOP $found 2>/dev/null
	kill -KILL $all $found 2>/dev/null
	i=$((i + 1))
	sweep
	[ "$found" != ' ' ] || break
	sleep 0.05 2>/dev/null || sleep 1
done
w=
if [ -p "$d/out" ]; then
	(printf '0 dead\n' 1<> "$d/out") 2>/dev/null &
	w=$!
fi
rm -rf "$d" 2>/dev/null
[ -z "$w" ] || kill -KILL "$w" 2>/dev/null
if [ "$found" != ' ' ]; then echo "alive$found"; else echo ok; fi
exit 0
`
