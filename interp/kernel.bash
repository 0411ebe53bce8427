# sandboxkit interp kernel v1 for Bash: runs cells in one persistent bash
# and answers through files (see the package doc of interp). Names that
# start with sk_ belong to the kernel.
# Usage: bash kernel.bash DIR (with SIGINT not ignored).
# A cell's output goes to files that become events when the cell ends: Bash
# output is not streamed while the cell runs.
sk_d=$1
sk_busy=0 sk_int=0 sk_count=0 sk_max_o=-1 sk_max_e=-1
# SIGINT ends the running command (it goes to the whole process group) and
# returns from the cell, or from the function of the cell that runs.
trap 'if [ "$sk_busy" = 1 ]; then sk_int=1; return 130 2>/dev/null; fi' INT
# sk_enc NAME FILE MAX: appends FILE, or its first MAX bytes when MAX is
# not negative, to the cell's event file as NAME events of 32766 bytes
# each (43688 base64 characters). It prints true when it cut FILE.
sk_enc() {
	local size
	[ -s "$2" ] || { echo false; return 0; }
	size=$(wc -c < "$2")
	if [ "$3" -ge 0 ] && [ "$size" -gt "$3" ]; then
		head -c "$3" < "$2" | base64 -w 43688 | sed 's/.*/{"type":"'"$1"'","data":"&"}/' >> "$sk_ev"
		echo true
	else
		base64 -w 43688 < "$2" | sed 's/.*/{"type":"'"$1"'","data":"&"}/' >> "$sk_ev"
		echo false
	fi
}
# sk_begin N: prepares request N; fails when there is nothing to run.
sk_begin() {
	local head t
	sk_n=$1 sk_ev=$sk_d/ev/$1
	[ -e "$sk_ev.done" ] && return 1
	[ -r "$sk_d/req/$sk_n" ] || return 1
	IFS= read -r head < "$sk_d/req/$sk_n"
	t=0
	if [[ $head =~ \"timeout\":\ *([0-9.]+) ]]; then t=${BASH_REMATCH[1]}; fi
	sk_max_o=-1 sk_max_e=-1
	if [[ $head =~ \"max_stdout\":\ *(-?[0-9]+) ]]; then sk_max_o=${BASH_REMATCH[1]}; fi
	if [[ $head =~ \"max_stderr\":\ *(-?[0-9]+) ]]; then sk_max_e=${BASH_REMATCH[1]}; fi
	tail -n +2 "$sk_d/req/$sk_n" > "$sk_d/cell.sh"
	# Runs of one kernel are served in order: the events of the request
	# before the previous one were read long ago.
	rm -f "$sk_d/ev/$((sk_n - 2))" "$sk_d/ev/$((sk_n - 2)).done"
	: >> "$sk_ev"
	rm -f "$sk_d/timedout"
	printf '%s\n' "$sk_n" > "$sk_d/running"
	# A tick every second while the cell runs lets a client that missed
	# a wake-up look again.
	( (while IFS= read -r sk_r < "$sk_d/running" && [ "$sk_r" = "$sk_n" ]; do
		sleep 1
		printf '%s tick\n' "$sk_n" 1<> "$sk_d/out"
	done) > /dev/null 2>&1 &)
	if [ "$t" != 0 ]; then
		( (sleep "$t" && [ "$(cat "$sk_d/running" 2>/dev/null)" = "$sk_n" ] && : > "$sk_d/timedout" && read -r g < "$sk_d/group" && kill -INT "-$g") > /dev/null 2>&1 &)
	fi
	sk_count=$((sk_count + 1))
	sk_int=0
}
# sk_end STATUS: reports the cell's end.
sk_end() {
	local to=false intr=false ocut ecut
	ocut=$(sk_enc stdout "$sk_d/o" "$sk_max_o")
	ecut=$(sk_enc stderr "$sk_d/e" "$sk_max_e")
	: > "$sk_d/o"
	: > "$sk_d/e"
	[ "$sk_int" = 1 ] && intr=true
	[ "$intr" = true ] && [ -e "$sk_d/timedout" ] && to=true
	if [ "$1" != 0 ]; then
		printf '{"type":"error","name":"ExitStatus","value":"%s","traceback":[]}\n' "$1" >> "$sk_ev"
	fi
	printf '{"type":"done","count":%d,"interrupted":%s,"timed_out":%s,"status":%d,"stdout_cut":%s,"stderr_cut":%s}\n' "$sk_count" "$intr" "$to" "$1" "${ocut:-false}" "${ecut:-false}" >> "$sk_ev"
	rm -f "$sk_d/running" "$sk_d/req/$sk_n"
	wc -c < "$sk_ev" > "$sk_ev.tmp" && mv -f "$sk_ev.tmp" "$sk_ev.done"
	printf '%s done\n' "$sk_n" 1<> "$sk_d/out"
}
exec 3<> "$sk_d/in" < /dev/null
printf '%s\n' "$$" > "$sk_d/ready.tmp" && mv -f "$sk_d/ready.tmp" "$sk_d/ready" || exit 1
printf '0 ready\n' 1<> "$sk_d/out"
while :; do
	IFS= read -r sk_n <&3 || continue
	case $sk_n in
	'' | *[!0-9]*) continue ;;
	esac
	sk_begin "$sk_n" || continue
	sk_busy=1
	source "$sk_d/cell.sh" > "$sk_d/o" 2> "$sk_d/e"
	sk_st=$?
	sk_busy=0
	sk_end "$sk_st"
done
