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

t0=$(date +%s)
echo "[boot $(date +%T)] booting $img (kernel $kver, ${smp} vCPU, ${mem}M); console in $share/console.log" >&2
# panic=-1 and the outer timeout: a guest that cannot boot ends instead of hanging.
# No -no-reboot: the check's own `systemctl reboot` is a real second boot.
rc=0
nice -n 5 timeout "$timeout" qemu-system-x86_64 \
	-machine pc -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" \
	-nographic -nic none \
	-kernel "/boot/vmlinuz-$kver" -initrd "/boot/initrd.img-$kver" \
	-append "root=/dev/vda rw console=ttyS0,115200 panic=-1 systemd.unified_cgroup_hierarchy=1" \
	-drive file="$img",format=raw,if=virtio,snapshot=on \
	-virtfs local,path="$share",mount_tag=hostshare,security_model=none,id=hostshare \
	</dev/null >"$share/console.log" 2>&1 || rc=$?
echo "[boot $(date +%T)] qemu exited ($rc) after $(($(date +%s) - t0))s" >&2

status=0
n=0
for log in "$share"/result-*.log; do
	[ -e "$log" ] || continue
	n=$((n + 1))
	echo "=== $(basename "$log")"
	cat "$log"
	last=$(grep '^CHECK-EXIT: ' "$log" | tail -1 | cut -d' ' -f2)
	case $last in 0 | 10) ;; *) status=1 ;; esac
done
if [ $n = 0 ]; then
	echo "no result from the guest; the console's end:" >&2
	tail -40 "$share/console.log" >&2
	exit 1
fi
# The last boot must have finished with 0 (not asked for another boot).
[ "$last" = 0 ] || status=1
[ $status = 0 ] && echo "test-systemd: PASS ($n boots)" || echo "test-systemd: FAIL (see above; console in $share/console.log)"
exit $status
