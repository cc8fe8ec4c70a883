#!/bin/bash
# Boots the appliance image under qemu (software emulation, no network card) with
# the kernel of /boot, runs CHECK inside (see check-driver), and exits 0 iff every
# boot's check passed. The image never changes: its writes go to qemu's temporary
# snapshot, which lives as long as qemu does, so a reboot asked for by the check
# (exit status 10, or 11 after a failure) sees what the first boot left.
#
# Usage: rootfs/appliance/boot.sh IMG CHECK SHARE_DIR [FILE...]
#   FILEs are copied into the share, which the guest mounts on /mnt/host.
# Results: SHARE_DIR/result-<boot>.log, SHARE_DIR/console.log.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 IMG CHECK SHARE_DIR [FILE...]" >&2; exit 2; }
img=$1 check=$2 share=$3
shift 3
kver=$(cat "$img.kver")
mem=${MEM:-2048}
smp=${SMP:-2}
timeout=${BOOT_TIMEOUT:-900}

rm -rf "$share"
mkdir -p "$share"
cp "$check" "$share/check.sh"
for f in "$@"; do cp "$f" "$share/"; done

# A guest that prints nothing for BOOT_STALL seconds is frozen: its heartbeat
# (heartbeat.service) prints a line every 30s from early boot to shutdown. Such a
# boot is stopped at once and, BOOT_TRIES times in all, booted again from the start
# with single-threaded emulation: a freeze of the emulator's vCPU threads is the
# one failure a second boot can tell from the appliance's own.
stall=${BOOT_STALL:-240}
tries=${BOOT_TRIES:-2}
accel=tcg,thread=multi

# boot_once: one qemu run from a fresh snapshot; sets rc, and stalled=yes when
# the guest went silent.
boot_once() {
	rm -f "$share"/result-*.log
	t0=$(date +%s)
	echo "[boot $(date +%T)] booting $img (kernel $kver, ${smp} vCPU, ${mem}M, $accel); console in $share/console.log" >&2
	# panic=-1 and the outer timeout: a guest that cannot boot ends instead of hanging.
	# No -no-reboot: the check's own `systemctl reboot` is a real second boot.
	nice -n 5 timeout "$timeout" qemu-system-x86_64 \
		-machine pc -accel "$accel" -cpu max -smp "$smp" -m "$mem" \
		-nographic -nic none \
		-kernel "/boot/vmlinuz-$kver" -initrd "/boot/initrd.img-$kver" \
		-append "root=/dev/vda rw console=ttyS0,115200 panic=-1 systemd.unified_cgroup_hierarchy=1" \
		-drive file="$img",format=raw,if=virtio,snapshot=on \
		-virtfs local,path="$share",mount_tag=hostshare,security_model=none,id=hostshare \
		</dev/null >"$share/console.log" 2>&1 &
	local qpid=$! size=-1 now quiet=0
	stalled=no
	while kill -0 $qpid 2>/dev/null; do
		sleep 5
		now=$(stat -c %s "$share/console.log")
		if [ "$now" != "$size" ]; then size=$now quiet=0; else quiet=$((quiet + 5)); fi
		if [ $quiet -ge "$stall" ]; then
			echo "[boot $(date +%T)] the guest has printed nothing for ${quiet}s (its heartbeat is every 30s): frozen, stopping it" >&2
			stalled=yes
			kill $qpid 2>/dev/null || true
			break
		fi
	done
	rc=0
	wait $qpid || rc=$?
	echo "[boot $(date +%T)] qemu exited ($rc) after $(($(date +%s) - t0))s" >&2
}

try=1
while :; do
	boot_once
	[ $stalled = yes ] && [ $try -lt "$tries" ] || break
	cp "$share/console.log" "$share/console-stalled-$try.log"
	echo "[boot $(date +%T)] the console of the frozen boot: $share/console-stalled-$try.log; booting again with one emulation thread" >&2
	try=$((try + 1))
	accel=tcg,thread=single
done

# shutdown_took N LOG: how long boot N's power-off or reboot took, from the
# check-driver's request (LOG's SHUTDOWN: line) to the kernel's last line, both
# on the guest's kernel clock; fails when over SHUTDOWN_MAX seconds (if set).
# systemd-shutdown waits up to 90s for a process that ignores SIGTERM.
shutdown_took() {
	local req end took
	req=$(sed -n 's/^SHUTDOWN: [a-z]* requested at //p' "$2" | tail -1)
	end=$(grep -a -o '^\[ *[0-9.]*\] reboot: \(Power down\|Restarting system\)' "$share/console.log" |
		sed -n "${1}s/^\[ *\([0-9.]*\)\].*/\1/p")
	if [ -z "$req" ] || [ -z "$end" ]; then
		echo "SHUTDOWN boot=$1: not measured (request ${req:-missing}, kernel's last line ${end:-missing})"
		return 0
	fi
	took=$(awk -v a="$req" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
	echo "SHUTDOWN boot=$1: took ${took}s (asked at ${req}s, the kernel's last line at ${end}s)"
	[ -z "${SHUTDOWN_MAX:-}" ] && return 0
	awk -v t="$took" -v m="$SHUTDOWN_MAX" 'BEGIN { exit !(t <= m) }' && return 0
	echo "SHUTDOWN boot=$1: FAIL: over SHUTDOWN_MAX=${SHUTDOWN_MAX}s; what systemd waited for:"
	grep -a -i -E 'waiting for process|timed out|sending sig' "$share/console.log" | tail -10
	return 1
}

status=0
n=0
for log in "$share"/result-*.log; do
	[ -e "$log" ] || continue
	n=$((n + 1))
	echo "=== $(basename "$log")"
	cat "$log"
	last=$(grep '^CHECK-EXIT: ' "$log" | tail -1 | cut -d' ' -f2)
	case $last in 0 | 10) ;; *) status=1 ;; esac
	shutdown_took "$n" "$log" || status=1
done
if [ $n = 0 ]; then
	echo "no result from the guest; the console's end:" >&2
	tail -30 "$share/console.log" >&2
	echo "the guest's last heartbeats:" >&2
	grep -a 'heartbeat:' "$share/console.log" | tail -3 >&2 || echo "(none)" >&2
	[ $stalled = no ] || echo "$check: FAIL (the guest froze: nothing on its console for ${stall}s)" >&2
	exit 1
fi
# The last boot must have finished with 0 (not asked for another boot).
[ "$last" = 0 ] || status=1
[ $status = 0 ] && echo "$check: PASS ($n boots)" || echo "$check: FAIL (see above; console in $share/console.log)"
exit $status
