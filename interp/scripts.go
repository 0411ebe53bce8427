package interp

// The fixed POSIX sh programs this package runs in the sandbox. None is
// assembled from caller input: paths and numbers reach them as positional
// arguments of `sh -c <script> <name> args...`, and data (the kernel's
// source, a cell's code) on stdin.
//
// Files in a kernel directory d (created readable by the sandbox's user only):
//
//	in          FIFO the kernel reads request numbers from, one per line
//	ready       "<kernel pid>", published once the kernel listens
//	log         the kernel process's own stdout and stderr
//	req/N       request N: a JSON header line, then the cell's code
//	ev/N        request N's events, JSON lines, appended by the kernel
//	ev/N.done   present once ev/N is complete
//	running     "N" while request N's cell runs

const prelude = `IFS=' 	
'
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
export PATH
# alive PID: PID runs and is no zombie (a zombie has an empty cmdline).
alive() {
	kill -0 "$1" 2>/dev/null || return 1
	[ ! -d /proc/self ] || grep -q . "/proc/$1/cmdline" 2>/dev/null
}
`

// launchScript stores the kernel program (read from stdin) under its
// content hash unless it is there already, then starts a kernel detached
// from this command and waits until it listens. Arguments: BASE KID FILE
// LANG. It prints "ok PID", or "error=..." for a missing interpreter, or
// "failed" followed by the end of the kernel's log.
const launchScript = prelude + `base=$1 kid=$2 file=$3 lang=$4
d=$base/$kid
case $lang in
python) prog=$(command -v python3) || { cat > /dev/null; echo 'error=python3 is not installed in the sandbox'; exit 0; } ;;
bash) prog=$(command -v bash) || { cat > /dev/null; echo 'error=bash is not installed in the sandbox'; exit 0; } ;;
*) cat > /dev/null; echo "error=unknown language"; exit 0 ;;
esac
(umask 077 && mkdir -p "$base") || exit 1
if [ -s "$base/$file" ]; then
	cat > /dev/null
else
	cat > "$base/$file.tmp.$$" && mv -f "$base/$file.tmp.$$" "$base/$file" || exit 1
fi
(umask 077 && mkdir "$d" && mkdir "$d/req" "$d/ev" && mkfifo "$d/in") || exit 1
detach=
if command -v setsid > /dev/null 2>&1; then
	detach=setsid
elif command -v nohup > /dev/null 2>&1; then
	detach=nohup
fi
# Started from a subshell that exits at once, so that the kernel is no
# descendant of this command: a provider that ends this command's process
# tree leaves it alone.
(
	MPLBACKEND=Agg PYTHONIOENCODING=utf-8 PYTHONDONTWRITEBYTECODE=1
	export MPLBACKEND PYTHONIOENCODING PYTHONDONTWRITEBYTECODE
	# A command started with & by a non-interactive shell ignores SIGINT,
	# and a shell cannot trap a signal ignored at its start: restore it.
	dflt=
	if env --default-signal=INT true > /dev/null 2>&1; then dflt='env --default-signal=INT'; fi
	$detach $dflt "$prog" "$base/$file" "$d" < /dev/null >> "$d/log" 2>&1 &
	echo $! > "$d/spawn"
) < /dev/null > /dev/null 2>&1
i=0
while [ ! -e "$d/ready" ]; do
	if [ "$i" -ge 20 ]; then
		p=$(cat "$d/spawn" 2>/dev/null)
		if [ -n "$p" ] && ! alive "$p" && [ ! -e "$d/ready" ]; then
			echo failed
			tail -c 4000 "$d/log" 2>/dev/null
			exit 0
		fi
	fi
	if [ "$i" -ge 3000 ]; then
		echo failed
		echo 'the kernel did not start within 60 s'
		exit 0
	fi
	if [ "$i" -lt 50 ]; then sleep 0.005; else sleep 0.02; fi
	i=$((i + 1))
done
echo "ok $(cat "$d/ready")"
`

// runScript submits request N (its header and code on stdin) unless it was
// submitted already, then waits for its events, and prints a status line
// "STATE SIZE" (STATE: done, run or dead; SIZE: bytes in ev/N when the
// state was taken) followed by at most MAX bytes of ev/N from byte OFF on.
// It returns once the request is done, the kernel is dead, or WAIT
// milliseconds have passed with new events (or 20 times WAIT without).
// Arguments: D N OFF MAX WAIT SUBMIT(0|1).
const runScript = prelude + `d=$1 n=$2 off=$3 max=$4 wait=$5 submit=$6
ev=$d/ev/$n
pid=$(cat "$d/ready" 2>/dev/null)
if [ -z "$pid" ]; then
	echo 'dead 0'
	exit 0
fi
if [ "$submit" = 1 ]; then
	if [ -e "$d/req/$n" ] || [ -e "$ev" ]; then
		cat > /dev/null
	else
		cat > "$d/req/$n.tmp" && mv -f "$d/req/$n.tmp" "$d/req/$n" || exit 1
		printf '%s\n' "$n" 1<> "$d/in"
	fi
fi
t=0 i=0
while :; do
	if [ -e "$ev.done" ]; then st=done; break; fi
	if [ $((i % 4)) = 3 ] && ! alive "$pid"; then
		if [ -e "$ev.done" ]; then st=done; else st=dead; fi
		break
	fi
	if [ "$t" -ge "$wait" ] && [ $((i % 4)) = 0 ]; then
		sz=$(wc -c < "$ev" 2>/dev/null || echo 0)
		if [ "$sz" -gt "$off" ] || [ "$t" -ge $((wait * 20)) ]; then st=run; break; fi
	fi
	if [ "$i" -lt 10 ]; then
		sleep 0.001; t=$((t + 1))
	elif [ "$i" -lt 40 ]; then
		sleep 0.005; t=$((t + 5))
	else
		sleep 0.02; t=$((t + 20))
	fi
	i=$((i + 1))
done
sz=$(wc -c < "$ev" 2>/dev/null || echo 0)
sz=$((sz + 0))
echo "$st $sz"
if [ "$sz" -gt "$off" ]; then
	tail -c +$((off + 1)) "$ev" | head -c "$max"
fi
`

// interruptScript sends SIGINT to the kernel when request N runs.
// Arguments: D N.
const interruptScript = prelude + `d=$1 n=$2
pid=$(cat "$d/ready" 2>/dev/null)
if [ -n "$pid" ] && [ "$(cat "$d/running" 2>/dev/null)" = "$n" ]; then
	# The kernel leads its process group (setsid): the cell's commands get
	# the signal too, as from a terminal's Ctrl-C.
	kill -INT -- "-$pid" 2>/dev/null || kill -INT "$pid" 2>/dev/null
fi
exit 0
`

// stopScript ends the kernel and everything it started (its process
// group), and removes its directory. Arguments: D.
const stopScript = prelude + `d=$1
pid=$(cat "$d/ready" 2>/dev/null)
[ -n "$pid" ] || pid=$(cat "$d/spawn" 2>/dev/null)
if [ -n "$pid" ]; then
	kill -KILL -- "-$pid" 2>/dev/null
	kill -KILL "$pid" 2>/dev/null
fi
rm -rf "$d"
exit 0
`

// killScript kills the kernel process only, as an out-of-memory killer
// would (tests use it). Arguments: D.
const killScript = prelude + `d=$1
kill -KILL "$(cat "$d/ready")"
`
