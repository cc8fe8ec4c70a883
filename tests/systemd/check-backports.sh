#!/bin/sh
# The assertions of `make test-systemd-backports`, run as root inside the
# appliance built with systemd from bookworm-backports (254): what only
# systemd >= 253/254 has. One boot. Exit 0: passed; else failed.
# - Type=notify-reload (253): the package's drop-in is installed, and
#   `systemctl reload` returns once the daemon said READY=1 again.
# - DelegateSubgroup= (254) with cgroupDriver: cgroupfs: the daemon, its
#   monitors and the unit's commands in <unit>/daemon, the pods in the unit's
#   delegated subtree with their limits holding; stop leaves them, start and
#   restart adopt them, nothing escapes the unit.
# - Socket activation: the CLI socket and the read-only port from .socket units.
# - --ready-when=pods-ready:X with a pod that never gets Ready: the start fails
#   at TimeoutStartSec, STATUS= naming the pod.
# Every wait is for a state the system reports, bounded; none is a bare sleep.
fail=0
pod=web-appliance
share=/mnt/host
unit=/sys/fs/cgroup/system.slice/staticpodd.service
conf=/etc/staticpodd/config.yaml

say() { echo "[$(cut -d' ' -f1 /proc/uptime)s] $*"; }
ok() { say "ok   $*"; }
bad() { say "FAIL $*"; fail=1; }
check() { # check DESCRIPTION COMMAND...
	d=$1; shift
	if "$@"; then ok "$d"; else bad "$d"; fi
}
until_ok() { # until_ok SECONDS COMMAND...: polls COMMAND every 0.2s until it succeeds.
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
serves() {
	timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080 && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3' 2>/dev/null |
		grep -q 'hello from staticpodd'
}
new_mainpid() { p=$(mainpid); [ "$p" != 0 ] && [ "$p" != "$1" ] && active; }
cgroup_of() { echo /sys/fs/cgroup$(cut -d: -f3 /proc/$1/cgroup); }
in_unit() { case $(cgroup_of $1) in $unit/*) return 0 ;; esac; return 1; }
dump() {
	systemctl status staticpodd --no-pager -l | head -30
	journalctl -u staticpodd -b --no-pager | tail -40
}

version=$(systemctl --version | awk 'NR == 1 { print $2 }')
say "PID1=$(cat /proc/1/comm) kernel=$(uname -r) cgroupfs=$(stat -fc %T /sys/fs/cgroup) systemd=$version"
check "systemd is 254 or later" [ "$version" -ge 254 ]
check "cgroup v2 unified" [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]
check "staticpodd is active after boot" until_ok 60 active
check "pod $pod is Ready" until_ok 120 pod_ready $pod
check "pod $pod serves" until_ok 30 serves
# Where the time between the image's import and web's start goes (seconds since
# the kernel started): the daemon's lines about images and the pod's start, the
# events (their counts say how many attempts failed), and when the runtime
# began each container (its record's createdAt: the rootfs prepared, before
# its init runs).
journalctl -u staticpodd -b -o short-monotonic --no-pager 2>/dev/null |
	grep -i -E 'import|image|pull|started|ready' | head -30 | sed 's/^/  journal: /'
staticpodd events 2>/dev/null | grep -i -E 'image|pull|creat|start' | sed 's/^/  event: /'
boot_s=$(awk -v now="$(date +%s.%N)" '{ printf "%.3f", now - $1 }' /proc/uptime)
for f in /run/staticpodd/containers/*/container.json; do
	[ -e "$f" ] || continue
	created=$(grep -o '"createdAt": *"[^"]*"' "$f" | head -1 | cut -d'"' -f4)
	say "  container $(basename "$(dirname "$f")"): record created at $(awk -v t="$(date -d "$created" +%s.%N)" -v b="$boot_s" 'BEGIN { printf "%.1f", t - b }')s since the kernel's start"
done

# Type=notify-reload: the drop-in is there, and reload waits for the daemon.
check "notify-reload: the package linked its drop-in" [ -L /lib/systemd/system/staticpodd.service.d/notify-reload.conf ]
check "notify-reload: the unit's Type" [ "$(systemctl show -p Type --value staticpodd)" = notify-reload ]
old=$(mainpid)
cp $conf /tmp/config.yaml.orig
sed -i 's/^fileCheckFrequency: .*/fileCheckFrequency: 7s/' $conf
check "notify-reload: systemctl reload succeeds" systemctl reload staticpodd
# No wait: the reload job ends only after RELOADING=1 ... READY=1.
check "notify-reload: the change was applied when reload returned" sh -c "journalctl -u staticpodd -b -o json --no-pager | grep 'configuration change applied' | grep -q '\"FIELD\":\"fileCheckFrequency\"'"
check "notify-reload: the same daemon" [ "$(mainpid)" = "$old" ]
cp /tmp/config.yaml.orig $conf

# DelegateSubgroup=daemon: the daemon and its monitors in <unit>/daemon, and
# nothing in the unit's own cgroup.
check "subgroup: the package linked its drop-in" [ -L /lib/systemd/system/staticpodd.service.d/delegate-subgroup.conf ]
check "subgroup: the daemon runs in <unit>/daemon" [ "$(cgroup_of $(mainpid))" = $unit/daemon ]
say "subgroup: in $unit/daemon: $(cat $unit/daemon/cgroup.procs | tr '\n' ' ')"
check "subgroup: the unit's own cgroup holds no process" [ -z "$(cat $unit/cgroup.procs)" ]
mon=$(pgrep -f __staticpodd_monitor | head -1)
check "subgroup: a monitor runs in <unit>/daemon too" sh -c "[ -n '$mon' ] && [ '$(cgroup_of ${mon:-1})' = $unit/daemon ]"

# cgroupfs pods inside the unit: web goes, the root and driver change, web comes back.
mv /etc/kubernetes/manifests/web.yaml /tmp/web.yaml
check "pods in the unit: web removed" until_ok 60 sh -c "! staticpodd ps | grep -q web"
sed -i 's|^cgroupRoot: .*|cgroupRoot: /system.slice/staticpodd.service/pods|' $conf
# (cgroupfs by name: unset, the driver is systemd here, where systemd is init.)
echo "cgroupDriver: cgroupfs" >>$conf
check "pods in the unit: restart with the new cgroupRoot" systemctl restart staticpodd
mv /tmp/web.yaml /etc/kubernetes/manifests/web.yaml
check "pods in the unit: web Ready again" until_ok 120 pod_ready $pod
pid=$(httpd_pid)
wcg=$(cgroup_of $pid)
say "pods in the unit: web's cgroup $wcg; the unit's subtree_control: $(cat $unit/cgroup.subtree_control)"
check "pods in the unit: web's container under <unit>/pods" sh -c "echo $wcg | grep -q '^$unit/pods/pod[0-9a-f-]*/[0-9a-f]*$'"
check "pods in the unit: the unit enables memory for its subtree" grep -qw memory $unit/cgroup.subtree_control
check "pods in the unit: web's memory.max is 32Mi" [ "$(cat $wcg/memory.max)" = 33554432 ]
check "pods in the unit: web's cpu.max is 100m" [ "$(cat $wcg/cpu.max)" = "10000 100000" ]
check "pods in the unit: web pod's memory.max is 32Mi" [ "$(cat $(dirname $wcg)/memory.max)" = 33554432 ]
cp $share/memhog.yaml /etc/kubernetes/manifests/
check "pods in the unit: memhog's hog is OOMKilled" until_ok 90 sh -c "staticpodd ps -o wide | grep -E 'memhog-appliance +hog +.*OOMKilled'"
check "pods in the unit: memhog's survivor runs" until_ok 60 pgrep -x -f 'sleep 3600'
s=$(pgrep -x -f 'sleep 3600' | head -1)
scg=$(cgroup_of $s)
check "pods in the unit: survivor's memory.max is 16Mi" [ "$(cat $scg/memory.max)" = 16777216 ]
check "pods in the unit: survivor's memory.events counts the OOM kill" grep -q -E '^oom_kill [1-9]' $scg/memory.events
check "pods in the unit: the kill stayed in the container: web still serves" serves
check "pods in the unit: the survivor is in the unit" in_unit $s
rm /etc/kubernetes/manifests/memhog.yaml
check "pods in the unit: memhog removed" until_ok 60 sh -c "! staticpodd ps | grep -q memhog"
systemd-cgls --no-pager -u staticpodd.service 2>&1 | head -20

# Stop leaves the pods; start and restart put the new daemon in <unit>/daemon
# (with controllers enabled below the unit, systemd 252 could not start
# anything in the unit's own cgroup) and it adopts them.
check "pods in the unit: systemctl stop succeeds" systemctl stop staticpodd
check "pods in the unit: container still runs after stop" kill -0 $pid
check "pods in the unit: systemctl start succeeds" systemctl start staticpodd
check "pods in the unit: the new daemon in <unit>/daemon" [ "$(cgroup_of $(mainpid))" = $unit/daemon ]
check "pods in the unit: container pid unchanged after start" [ "$(httpd_pid)" = "$pid" ]
old=$(mainpid)
check "pods in the unit: systemctl restart succeeds" systemctl restart staticpodd
check "pods in the unit: a new daemon" until_ok 60 new_mainpid $old
check "pods in the unit: container pid unchanged after restart" [ "$(httpd_pid)" = "$pid" ]
old=$(mainpid)
kill -9 $old
check "pods in the unit: kill -9: systemd starts a new daemon" until_ok 60 new_mainpid $old
check "pods in the unit: container pid unchanged after kill -9" [ "$(httpd_pid)" = "$pid" ]
check "pods in the unit: reload works" systemctl reload staticpodd
check "pods in the unit: pod still Ready" until_ok 60 pod_ready $pod
leaked=
for p in $(pgrep -f 'httpd|__staticpodd_monitor'); do in_unit $p || leaked="$leaked $p:$(cgroup_of $p)"; done
check "pods in the unit: no container or monitor outside the unit${leaked}" [ -z "$leaked" ]

# Socket activation: the example units pass the CLI socket and the read-only
# port; the daemon serves on them.
cp /usr/share/doc/staticpodd/examples/staticpodd.socket /etc/systemd/system/
cat >/etc/systemd/system/staticpodd-read-only.socket <<'UNIT'
[Unit]
Description=staticpodd's read-only port (socket activation)
PartOf=staticpodd.service

[Socket]
ListenStream=127.0.0.1:10255
FileDescriptorName=read-only
Service=staticpodd.service

[Install]
WantedBy=sockets.target
UNIT
systemctl daemon-reload
systemctl stop staticpodd
check "sockets: both socket units start" systemctl start staticpodd.socket staticpodd-read-only.socket
check "sockets: staticpodd starts with them" systemctl start staticpodd
check "sockets: the CLI socket was passed" until_ok 20 sh -c "journalctl -u staticpodd -b --no-pager | grep -q 'serving the CLI on a socket systemd passed'"
check "sockets: the read-only port was passed" until_ok 20 sh -c "journalctl -u staticpodd -b --no-pager | grep -q 'serving the read-only port on a socket systemd passed'"
check "sockets: staticpodd ps answers" until_ok 30 pod_ready $pod
check "sockets: /healthz answers on the passed port" until_ok 20 sh -c "timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/10255 && printf \"GET /healthz HTTP/1.0\r\n\r\n\" >&3 && cat <&3' | grep -q '^ok'"
check "sockets: the container pid unchanged" [ "$(httpd_pid)" = "$pid" ]
systemctl stop staticpodd staticpodd.socket staticpodd-read-only.socket
rm /etc/systemd/system/staticpodd.socket /etc/systemd/system/staticpodd-read-only.socket
systemctl daemon-reload
systemctl start staticpodd

# --ready-when=pods-ready:never with a pod that never gets Ready: no
# extension of the start timeout, the start fails at TimeoutStartSec, and
# STATUS= says which pod it waited for. The pods keep running.
cat >/etc/kubernetes/manifests/never.yaml <<'POD'
apiVersion: v1
kind: Pod
metadata: {name: never}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    readinessProbe:
      exec: {command: ["false"]}
      periodSeconds: 1
POD
check "ready-when: the never-ready pod runs" until_ok 60 pod_running never-appliance
mkdir -p /run/systemd/system/staticpodd.service.d
printf '[Service]\nTimeoutStartSec=20s\nRestart=no\n' >/run/systemd/system/staticpodd.service.d/ready-test.conf
sed -i 's/^STATICPODD_ARGS=.*/STATICPODD_ARGS=--ready-when=pods-ready:never/' /etc/default/staticpodd
grep -q '^STATICPODD_ARGS=' /etc/default/staticpodd || echo 'STATICPODD_ARGS=--ready-when=pods-ready:never' >>/etc/default/staticpodd
systemctl daemon-reload
t0=$(date +%s)
systemctl restart staticpodd &
job=$!
check "ready-when: STATUS= says which pod it waits for" until_ok 60 sh -c "systemctl show -p StatusText --value staticpodd | grep -q 'waiting for pods-ready: pod never-appliance'"
wait $job
rc=$?
took=$(($(date +%s) - t0))
say "ready-when: restart exit $rc after ${took}s; Result=$(systemctl show -p Result --value staticpodd)"
check "ready-when: the start failed" [ $rc != 0 ]
# The probe had not answered when the gate first looked (a new daemon's prober
# starts afresh): that is progress, and extends the timeout once, by 60s.
check "ready-when: at TimeoutStartSec (20s) plus at most one extension (60s)" sh -c "[ $took -ge 18 ] && [ $took -le 100 ]"
check "ready-when: systemd says timeout" [ "$(systemctl show -p Result --value staticpodd)" = timeout ]
say "StatusText=$(systemctl show -p StatusText --value staticpodd)"
check "ready-when: the last STATUS= says what never came" sh -c "systemctl show -p StatusText --value staticpodd | grep -q 'never ready: waiting for pods-ready: pod never-appliance'"
check "ready-when: and so does the journal" sh -c "journalctl -u staticpodd -b --no-pager | grep -q 'stopping before READY=1'"
check "ready-when: web's container still runs" [ "$(httpd_pid)" = "$pid" ]
rm /etc/kubernetes/manifests/never.yaml /run/systemd/system/staticpodd.service.d/ready-test.conf
sed -i 's/^STATICPODD_ARGS=.*/STATICPODD_ARGS=/' /etc/default/staticpodd
systemctl daemon-reload
systemctl reset-failed staticpodd
check "ready-when: a start without it succeeds" systemctl start staticpodd
check "ready-when: the never pod removed" until_ok 60 sh -c "! staticpodd ps | grep -q never"
check "ready-when: web's container pid unchanged" [ "$(httpd_pid)" = "$pid" ]

[ $fail = 0 ] || dump
exit $fail
