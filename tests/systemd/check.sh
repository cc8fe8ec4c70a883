#!/bin/sh
# The assertions of `make test-systemd`, run as root inside the booted appliance
# (systemd as PID 1, cgroup v2) by its check-driver; $1 is the boot's number.
# Exit 0: passed, power off; 10: passed, reboot for the next boot; else failed.
# Every wait is for a state the system reports, bounded; none is a bare sleep.
boot=$1
fail=0
pod=web-appliance
share=/mnt/host

say() { echo "[$(cut -d' ' -f1 /proc/uptime)s] $*"; }
ok() { say "ok   $*"; }
bad() { say "FAIL $*"; fail=1; }
check() { # check DESCRIPTION COMMAND...
	d=$1; shift
	if "$@"; then ok "$d"; else bad "$d"; fi
}
# until_ok SECONDS COMMAND...: polls COMMAND every 0.2s until it succeeds.
until_ok() {
	t=$1; shift
	end=$(($(date +%s) + t))
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.2
	done
}
active() { [ "$(systemctl is-active staticpodd)" = active ]; }
mainpid() { systemctl show -p MainPID --value staticpodd; }
pod_running() { staticpodd ps 2>/dev/null | grep -E "^default +$1 .* Running " >/dev/null; }
pod_ready() { staticpodd ps 2>/dev/null | grep -E "^default +$1 +1/1 +Running " >/dev/null; }
httpd_pid() { pgrep -x httpd | head -1; }
serves() { busybox wget -q -T 2 -O- http://127.0.0.1:8080/ | grep -q 'hello from staticpodd'; }
new_mainpid() { p=$(mainpid); [ "$p" != 0 ] && [ "$p" != "$1" ] && active; }
dump() {
	systemctl status staticpodd --no-pager -l | head -30
	journalctl -u staticpodd -b --no-pager | tail -40
}

say "boot $boot: PID1=$(cat /proc/1/comm) kernel=$(uname -r) cgroupfs=$(stat -fc %T /sys/fs/cgroup) systemd=$(systemctl --version | head -1)"
check "systemd is PID 1" [ "$(cat /proc/1/comm)" = systemd ]
check "cgroup v2 unified" [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]

check "staticpodd is active after boot" until_ok 60 active
check "pod $pod runs" until_ok 120 pod_running $pod
check "pod $pod is Ready" until_ok 60 pod_ready $pod
check "pod $pod serves" until_ok 30 serves
status=$(systemctl show -p StatusText --value staticpodd)
say "StatusText=$status"
case $status in *"1 running"*) ok "StatusText is staticpodd's pod summary" ;; *) bad "StatusText is staticpodd's pod summary" ;; esac
# Boot to READY=1: the unit turns active on READY=1; the monotonic clock counts from the kernel's start.
ready_us=$(systemctl show -p ActiveEnterTimestampMonotonic --value staticpodd)
start_us=$(systemctl show -p ExecMainStartTimestampMonotonic --value staticpodd)
say "BOOT-TO-READY boot=$boot kernel-start-to-READY=$((ready_us / 1000))ms daemon-start-to-READY=$(((ready_us - start_us) / 1000))ms userspace=$(systemd-analyze time 2>/dev/null | head -1)"

if [ "$boot" = 1 ]; then
	pid=$(httpd_pid)
	say "container pid $pid, daemon pid $(mainpid)"

	# journald: the daemon's attributes as fields, with priorities.
	j=/tmp/journal.json
	journalctl -u staticpodd -b -o json --no-pager >$j
	check "journal has POD= fields" grep -q "\"POD\":\"[^\"]*$pod\"" $j
	check "journal has NAMESPACE= fields" grep -q '"NAMESPACE":"default"' $j
	check "journal has CONTAINER= fields" grep -q '"CONTAINER":"httpd"' $j
	check "journal has info priority records" grep -q '"PRIORITY":"6"' $j
	check "journal has warning priority records" grep -q '"PRIORITY":"4"' $j
	grep '"POD"' $j | head -2

	# systemctl restart: the new daemon adopts the container.
	old=$(mainpid)
	check "systemctl restart succeeds" systemctl restart staticpodd
	check "restart: a new daemon is active" until_ok 60 new_mainpid $old
	check "restart: container pid unchanged" [ "$(httpd_pid)" = "$pid" ]
	check "restart: pod still Ready" until_ok 60 pod_ready $pod

	# kill -9: systemd restarts the daemon (Restart=always), the pod stays.
	old=$(mainpid)
	kill -9 $old
	check "kill -9: systemd starts a new daemon" until_ok 60 new_mainpid $old
	check "kill -9: container pid unchanged" [ "$(httpd_pid)" = "$pid" ]
	check "kill -9: pod still Ready" until_ok 60 pod_ready $pod

	# kill -STOP: the watchdog restarts a frozen daemon. A runtime drop-in
	# shortens WatchdogSec (and the abort timeout) so the test waits seconds,
	# not a minute; the mechanism is the shipped unit's.
	mkdir -p /run/systemd/system/staticpodd.service.d
	printf '[Service]\nWatchdogSec=6s\nTimeoutAbortSec=3s\n' >/run/systemd/system/staticpodd.service.d/watchdog-test.conf
	systemctl daemon-reload
	systemctl restart staticpodd
	until_ok 60 pod_ready $pod
	old=$(mainpid)
	t0=$(date +%s)
	kill -STOP $old
	check "watchdog: a frozen daemon is replaced" until_ok 60 new_mainpid $old
	say "watchdog: replaced after $(($(date +%s) - t0))s (WatchdogSec=6s)"
	check "watchdog: journal says the watchdog fired" sh -c "journalctl -u staticpodd -b --no-pager | grep -q -i 'watchdog timeout'"
	check "watchdog: container pid unchanged" [ "$(httpd_pid)" = "$pid" ]
	rm /run/systemd/system/staticpodd.service.d/watchdog-test.conf
	systemctl daemon-reload

	# systemctl reload: the daemon re-reads its sources and answers with READY=1.
	check "systemctl reload succeeds" systemctl reload staticpodd
	check "reload: the daemon logged it" until_ok 20 sh -c "journalctl -u staticpodd -b --no-pager | grep -q 'reloading'"
	check "reload: the daemon is still active and the same" [ "$(systemctl is-active staticpodd)" = active ]

	# Limits under the cgroupfs driver: a memory hog is OOM-killed inside its limit.
	cp $share/memhog.yaml /etc/kubernetes/manifests/
	check "memhog: OOMKilled" until_ok 90 sh -c "staticpodd ps | grep -E '^default +memhog-appliance .*OOMKilled'"
	cg=$(find /sys/fs/cgroup -type d -path '*pod*' -name '*hog*' 2>/dev/null | head -1)
	[ -n "$cg" ] || cg=$(dirname "$(grep -l -x 16777216 $(find /sys/fs/cgroup -name memory.max 2>/dev/null) 2>/dev/null | head -1)")
	say "memhog cgroup: $cg"
	check "memhog: memory.max is 16Mi" [ "$(cat $cg/memory.max 2>/dev/null)" = 16777216 ]
	check "memhog: memory.events counts an OOM kill" sh -c "grep -q -E '^oom_kill [1-9]' $cg/memory.events"
	check "memhog: cpu.max is 250m" [ "$(cat $cg/cpu.max 2>/dev/null)" = "25000 100000" ]
	webcg=$(dirname "$(grep -l -x "$pid" $(find /sys/fs/cgroup -name cgroup.procs) 2>/dev/null | head -1)")
	say "web's container cgroup: $webcg"
	check "web: memory.max is 32Mi" [ "$(cat $webcg/memory.max)" = 33554432 ]
	check "web: cpu.max is 100m" [ "$(cat $webcg/cpu.max)" = "10000 100000" ]
	say "systemd-cgtop:"; systemd-cgtop -b -n 1 --depth=3 2>&1 | head -20
	say "daemon's cgroup: $(cat /proc/$(mainpid)/cgroup)"
	rm /etc/kubernetes/manifests/memhog.yaml
	check "memhog: removed" until_ok 60 sh -c "! staticpodd ps | grep -q memhog"

	# Upgrade with dpkg: the package restarts the daemon, never the pod.
	old=$(mainpid)
	check "dpkg -i of the next version succeeds" dpkg -i $share/staticpodd_*.1_*.deb
	check "upgrade: a new daemon is active" until_ok 60 new_mainpid $old
	check "upgrade: container pid unchanged" [ "$(httpd_pid)" = "$pid" ]
	check "upgrade: pod still Ready" until_ok 60 pod_ready $pod
	say "installed: $(dpkg-query -W staticpodd)"

	# systemctl stop stops the daemon, not the pods.
	check "systemctl stop succeeds" systemctl stop staticpodd
	check "stop: daemon inactive" [ "$(systemctl is-active staticpodd)" = inactive ]
	check "stop: container still runs" kill -0 "$pid"
	check "stop: pod still serves" serves
	[ $fail = 0 ] || dump
	[ $fail = 0 ] && exit 10
	exit 1
fi

# Boot 2: the reboot brought everything back from the manifests.
check "after reboot: the upgraded version is installed" sh -c "dpkg-query -W staticpodd | grep -q '\.1$'"
check "after reboot: staticpodd started from its manifests" pod_ready $pod

# Purge: the package goes with its config; the running pod is left alone and so is its state.
check "dpkg --purge succeeds" dpkg --purge staticpodd
check "purge: binary gone" [ ! -e /usr/bin/staticpodd ]
check "purge: config gone" [ ! -e /etc/staticpodd ]
check "purge: unit gone" sh -c "! systemctl cat staticpodd >/dev/null 2>&1"
check "purge: the pod's container still runs" serves
[ $fail = 0 ] || dump
exit $fail
