// Package bgproc is the one POSIX sh mechanism that starts a background
// command in a remote sandbox and leaves records a later request reads:
// the command runs under timeout(1) as the leader of a process group of
// its own, its pid and its exit status are published atomically as
// files, a timeout is told apart from a kill, and a signal reaches the
// whole process group.
//
// Two users share it: provider/daytona's background processes (Start and
// Attach over toolbox sessions) and package run's durable-run wrapper.
// Each builds its own script around Lib and keeps what is its own: run
// its claim, admission and budget records, daytona its session and log
// polling. Other providers do not need it: provider/local and the memory
// provider start processes natively from Go, e2b's daemon has process
// RPCs, and provider/docker's supervisor shares the watchdog of its Exec
// wrapper (an exec follows the output files there), so its timeout is
// not timeout(1)'s.
//
// # Records
//
// With a pid file P chosen by the caller:
//
//	P   the pid of the process group leader (timeout(1)), written once it started
//
// and the exit record the caller writes with bg_put from bg_rc and bg_why:
//
//	"<exit code> [timeout|killed]"
//
// which ParseExit reads back.
package bgproc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Lib defines the shell functions below. A script includes it before using
// them; it sets no variable and runs nothing but the definitions. Every
// argument is a separate word, so no caller input is ever parsed as shell
// text. Names starting with bg_ are reserved to it.
//
//	bg_put FILE TEXT
//	    FILE holds TEXT and a newline, published atomically (written to a
//	    temporary file beside it and renamed over it).
//	bg_start PIDFILE SIG KILLAFTER SECS CMD...
//	    Starts CMD in the background under timeout(1), which makes itself
//	    the leader of a new process group holding the command's whole tree,
//	    sends SIG to it after SECS seconds (Secs; "0": never) and KILL
//	    KILLAFTER seconds later ("0": never). The pid goes to PIDFILE (with
//	    bg_put) and to $bg_pid. CMD keeps the caller's stdin, stdout and
//	    stderr. The function bg_pre,
//	    which a script may redefine (by default it does nothing), runs, with
//	    no arguments (it reads the script's variables), in
//	    the command's subshell before the command, with the caller's
//	    redirections: a place to change directory or environment; when it
//	    fails, its status is the command's. Without timeout(1) in the
//	    sandbox CMD runs bare (no process group, no timeout). PIDFILE must
//	    be an absolute path.
//	bg_wait
//	    Waits for the command of the last bg_start and sets bg_rc to its
//	    exit status and bg_why to "timeout" when timeout(1) ended it (see
//	    below), else to "".
//	bg_signal PIDFILE SIG [WAIT [ENDFILE]]
//	    Sends SIG (a name or a number) to the process group whose leader's
//	    pid PIDFILE holds, or to that process alone when the group is gone.
//	    When PIDFILE is still empty, waits up to WAIT tenths of a second
//	    (default 0) for it: a signal sent just after a start may arrive
//	    before the launcher wrote the pid. The wait ends early once
//	    ENDFILE (the command's exit record) exists: a command that ended
//	    writes no pid any more. Returns 3 when PIDFILE holds no pid, 1
//	    when no process got the signal.
//
// A shell without job control gives a background command /dev/null as its
// stdin; bg_start passes the caller's on through fd 7, which it uses
// during the call.
//
// bg_signal's form, kill -SIG -PGID, is the one dash, bash, zsh and
// BusyBox all read (dash rejects "kill -s SIG -- -PGID").
//
// A timeout is told from a kill by two facts together: the status is 124
// (timeout(1) sent SIG and the command ended) or 137 (KILL ended
// timeout(1) itself, as a KILL from Signal would), and the command ran at
// least the whole seconds of SECS (date +%s before the start, so the
// measure never falls short). A kill within the last second before the
// timeout may thus read as a timeout. timeout(1)'s -v notice would tell
// them apart better, but it is written for a forwarded signal too, and
// probing for -v cost two process starts before every command.
const Lib = `bg_pre() { :; }
bg_put() {
	printf '%s\n' "$2" > "$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"
}
bg_start() {
	bg_pf=$1 bg_s=$4
	bg_o="-s $2"
	bg_k=$3
	shift 4
	bg_t0=$(date +%s)
	exec 7<&0
	if bg_tmo=$(command -v timeout 2>/dev/null) && [ -n "$bg_tmo" ]; then
		if [ "$bg_k" != 0 ] && "$bg_tmo" -k 1 1 true 2>/dev/null; then bg_o="$bg_o -k $bg_k"; fi
		(exec 0<&7 7<&-; bg_pre && exec "$bg_tmo" $bg_o "$bg_s" "$@") &
	else
		bg_s=0
		(exec 0<&7 7<&-; bg_pre && exec "$@") &
	fi
	bg_pid=$!
	exec 7<&-
	bg_put "$bg_pf" "$bg_pid"
}
bg_wait() {
	wait "$bg_pid" 2>/dev/null
	bg_rc=$?
	bg_why=
	case $bg_rc in
	124 | 137)
		if [ "$bg_s" != 0 ] && [ $(($(date +%s) - bg_t0)) -ge "${bg_s%%.*}" ]; then
			bg_why=timeout
		fi
		;;
	esac
}
bg_signal() {
	bg_i=0
	while [ ! -s "$1" ] && [ "$bg_i" -lt "${3:-0}" ] && { [ -z "$4" ] || [ ! -e "$4" ]; }; do
		sleep 0.1
		bg_i=$((bg_i + 1))
	done
	bg_g=$(cat "$1" 2>/dev/null) || return 3
	[ -n "$bg_g" ] || return 3
	kill -"$2" "-$bg_g" 2>/dev/null || kill -"$2" "$bg_g" 2>/dev/null
}
`

// Secs is d as the SECS argument of bg_start: seconds with millisecond
// precision, rounded up so that a timeout never fires early, or "0" (no
// timeout) when d is 0 or less.
func Secs(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
}

// Reasons an exit record may give.
const (
	ReasonTimeout = "timeout" // timeout(1) ended the command
	ReasonKilled  = "killed"  // the record's writer killed it on request
)

// Exit is what an exit record says.
type Exit struct {
	Code     int  // the exit status, as a shell reports it (128+n for signal n)
	TimedOut bool // timeout(1) ended the command
	Killed   bool // the command was killed on request
}

// ErrBadRecord is the error of a record ParseExit cannot read.
var ErrBadRecord = errors.New("bgproc: malformed exit record")

// ParseExit reads an exit record, "<code> [reason]". The reason "budget",
// written by package run's wrapper v1 (whose runs may outlive an
// upgrade), means a timeout too.
func ParseExit(rec string) (Exit, error) {
	f := strings.Fields(rec)
	if len(f) == 0 || len(f) > 2 {
		return Exit{}, fmt.Errorf("%w: %q", ErrBadRecord, rec)
	}
	code, err := strconv.Atoi(f[0])
	if err != nil || code < 0 || code > 255 {
		return Exit{}, fmt.Errorf("%w: %q: exit status %q", ErrBadRecord, rec, f[0])
	}
	e := Exit{Code: code}
	if len(f) == 2 {
		switch f[1] {
		case ReasonTimeout, "budget":
			e.TimedOut = true
		case ReasonKilled:
			e.Killed = true
		default:
			return Exit{}, fmt.Errorf("%w: %q: reason %q", ErrBadRecord, rec, f[1])
		}
	}
	return e, nil
}
