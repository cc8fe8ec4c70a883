#!/bin/sh
# The guest side of `make bench-systemd`, run as root inside the booted
# appliance (systemd as PID 1, cgroup v2) by its check-driver: tests/bench's
# start and scale benchmarks with the systemd cgroup driver on every side
# (the daemon's cgroupDriver: systemd, runc --systemd-cgroup, the floor's
# scopes), against the runc CLI and the floor program brought in the share
# for this boot only: the appliance carries neither. The guest is emulated:
# only the ratios mean anything.
# BENCH_ARGS (a file in the share, one line) are more arguments of the
# benchmark. PID 1's lines about the benchmark's slices and scopes go to
# units.log in the share.
share=/mnt/host
say() { echo "[$(cut -d' ' -f1 /proc/uptime)s] $*"; }
# until_ok SECONDS COMMAND...: polls COMMAND every 0.2s until it succeeds.
until_ok() {
	t=$1; shift
	end=$(($(date +%s) + t))
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.2
	done
}

# The appliance's own daemon and its pod out of the way: the benchmark's
# daemons have their own dirs, and nothing else should run beside them.
rm -f /etc/kubernetes/manifests/*
until_ok 120 sh -c 'staticpodd ps >/tmp/ps && ! grep -q web-appliance /tmp/ps && ! pgrep -x httpd' ||
	{ say "FAIL: the appliance's pod did not go away"; staticpodd ps; exit 1; }
systemctl stop staticpodd.service

# The benchmark's trees (100 runc bundles, the daemons' roots) in memory: the
# image's free space is its size's margin, not enough for them.
mkdir -p /bench
mount -t tmpfs -o size=2500m bench /bench || exit 1
for f in bench floor runc busybox.tar; do
	cp $share/$f /bench/$f || exit 1
done
args=$(cat $share/BENCH_ARGS 2>/dev/null)

say "kernel $(uname -r), $(systemctl --version | head -1), $(nproc) vCPU"
say "cgroup $(stat -f -c %T /sys/fs/cgroup), controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
say "$(staticpodd version 2>&1 | head -1); $(/bench/runc --version | head -1)"
say "load before: $(cat /proc/loadavg)"
# shellcheck disable=SC2086 # BENCH_ARGS is a list of arguments
TMPDIR=/bench /bench/bench -systemd-cgroup -staticpodd /usr/bin/staticpodd -image /bench/busybox.tar \
	-runc /bench/runc -floor /bench/floor $args
rc=$?
say "load after: $(cat /proc/loadavg)"
# systemd's side of every start, on the clock of -trace-starts' START lines:
# when each pod's slice and each scope were made.
journalctl -b -o short-monotonic --no-pager _PID=1 | grep -E 'staticpodd-|runc-' >$share/units.log
say "bench exited $rc"
exit $rc
