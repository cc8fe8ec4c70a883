# Start order (staticpodd.io/start-after) under a real systemd, sourced by
# check.sh (its say/ok/bad/check/until_ok/pod_ready/cgroup_of).
#
# Boot 1, systemd cgroup driver: stoporder_setup runs two pods, second
# starting after first, then critical, of priority class system-node-critical,
# and restarts first's container, so that its new scope is made after the
# others'; bootorder_install, with the daemon stopped, puts in
# place the pods of the next boot. Boot 1's reboot is systemd's: it stops the
# containers' scopes, not the daemon. Boot 2: stoporder_check reads what they
# logged as they stopped (a host path that outlives the reboot), and
# bootorder_check what the control-plane stand-ins did at boot.

# since T: seconds since T (an uptime), one decimal.
uptime_s() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(uptime_s)" 'BEGIN { printf "%.1f", b - a }'; }
scope_of() { basename "$(cgroup_of "$1")"; }

# stoporder_pod NAME [START_AFTER] [PRIORITY_CLASS]: a pod that logs its start and, on SIGTERM,
# its stop to /var/lib/stoporder/stop.log; second takes 2s over its stop, so
# that a first stopped at the same time logs before second's exit. The trap
# ignores SIGTERM first: systemd signals a scope's processes until no new one
# appears, and would kill what the trap forks (its date, its sleep).
stoporder_pod() {
	{
		printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: stoporder-%s\n' "$1"
		[ -z "$2" ] || printf '  annotations: {staticpodd.io/start-after: stoporder-%s}\n' "$2"
		printf 'spec:\n'
		[ -z "$3" ] || printf '  priorityClassName: %s\n' "$3"
		cat <<-POD
		  hostNetwork: true
		  terminationGracePeriodSeconds: 10
		  volumes: [{name: log, hostPath: {path: /var/lib/stoporder, type: DirectoryOrCreate}}]
		  containers:
		  - name: main
		    image: busybox:latest
		    imagePullPolicy: IfNotPresent
		    volumeMounts: [{name: log, mountPath: /log}]
		    command:
		    - sh
		    - -c
		    - |
		      now() { cut -d' ' -f1 /proc/uptime; }
		      trap 'trap "" TERM; echo "\$(now) $1 TERM" >>/log/stop.log; [ $1 = second ] && sleep 2; echo "\$(now) $1 exit" >>/log/stop.log; exit 0' TERM
		      echo "\$(now) $1 start" >>/log/stop.log
		      sleep 100000 &
		      wait
		POD
	} >/etc/kubernetes/manifests/stoporder-$1.yaml
}

stoporder_setup() {
	t0=$(uptime_s)
	stoporder_pod first
	stoporder_pod second first
	check "stop order: first is Ready" until_ok 60 pod_ready stoporder-first-appliance
	check "stop order: second, which starts after first, is Ready" until_ok 60 pod_ready stoporder-second-appliance
	a=$(pgrep -f 'first start' | head -1) b=$(pgrep -f 'second start' | head -1)
	ascope=$(scope_of "$a") bscope=$(scope_of "$b")
	say "stop order: first's scope $ascope, second's $bscope"
	check "stop order: second's scope is After= first's" sh -c "systemctl show -p After --value $bscope | tr ' ' '\n' | grep -qx $ascope"
	# critical, of a higher priority, starts last: its scope orders itself
	# Before= the others', of the default priority.
	stoporder_pod critical "" system-node-critical
	check "stop order: critical is Ready" until_ok 60 pod_ready stoporder-critical-appliance
	cscope=$(scope_of "$(pgrep -f 'critical start' | head -1)")
	say "stop order: critical's scope $cscope: Before=$(systemctl show -p Before --value "$cscope")"
	check "stop order: critical's scope is Before= first's and second's" sh -c "systemctl show -p Before --value $cscope | tr ' ' '\n' | grep -x -e $ascope -e $bscope | wc -l | grep -qx 2"
	# first restarts after second started: its new scope orders itself
	# Before= second's, which knows nothing of it.
	kill -KILL "$a"
	restarted() { p=$(pgrep -f 'first start' | head -1); [ -n "$p" ] && [ "$p" != "$a" ] && pod_ready stoporder-first-appliance; }
	check "stop order: first's container restarted" until_ok 90 restarted
	a2scope=$(scope_of "$(pgrep -f 'first start' | head -1)")
	say "stop order: first's new scope $a2scope: Before=$(systemctl show -p Before --value "$a2scope")"
	check "stop order: first's new scope is Before= second's" sh -c "systemctl show -p Before --value $a2scope | tr ' ' '\n' | grep -qx $bscope"
	check "stop order: first's new scope is After= critical's" sh -c "systemctl show -p After --value $a2scope | tr ' ' '\n' | grep -qx $cscope"
	say "TIMING stop order setup took $(since "$t0")s"
}

# stoporder_check: at boot 1's reboot, systemd stopped second's scope, then
# first's (its restarted one): first's SIGTERM came after second's exit; and
# critical's last, after both had exited.
stoporder_check() {
	log=/var/lib/stoporder/stop.log
	say "stop order: $log of the last power-off:"
	sed 's/^/  /' $log
	exit_line=$(grep -n ' second exit$' $log | tail -1 | cut -d: -f1)
	term_line=$(grep -n ' first TERM$' $log | tail -1 | cut -d: -f1)
	check "stop order: at power-off, second stopped, then first" [ "${term_line:-0}" -gt "${exit_line:-99999}" ]
	first_exit=$(grep -n ' first exit$' $log | tail -1 | cut -d: -f1)
	crit_term=$(grep -n ' critical TERM$' $log | tail -1 | cut -d: -f1)
	check "stop order: at power-off, the system-node-critical pod stopped after the default ones" \
		[ "${crit_term:-0}" -gt "${first_exit:-99999}" -a "${crit_term:-0}" -gt "${exit_line:-99999}" ]
	gap=$(awk '/ second TERM$/ { s = $1 } / second exit$/ { e = $1 } / first TERM$/ { f = $1 } END { printf "%.1fs after second'"'"'s, %.1fs after second exited", f - s, f - e }' $log)
	say "FIGURE stop order at power-off (systemd cgroup driver): first's SIGTERM came $gap (second takes 2s to stop)"
}

# standin NAME PORT NEEDS START_AFTER: a control-plane stand-in that logs its
# start to /var/lib/bootorder/starts.log and listens on PORT (its readiness
# probe); etcd's (NEEDS empty) takes 5s first, as a real one reads its data
# and elects itself; the others exit 1 when NEEDS, their server's port, does
# not answer, as kube-apiserver does when etcd does not (and the controllers
# when the API server does not), then take 1s to start.
standin() {
	{
		printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n' "$1"
		[ -z "$4" ] || printf '  annotations: {staticpodd.io/start-after: "%s"}\n' "$4"
		if [ -z "$3" ]; then
			wait_for="sleep 5"
		else
			wait_for="nc -w 2 127.0.0.1 $3 </dev/null || { echo \"\$(now) $1 exit 1: 127.0.0.1:$3 does not answer\" >>/log/starts.log; exit 1; }; sleep 1"
		fi
		cat <<-POD
		spec:
		  hostNetwork: true
		  terminationGracePeriodSeconds: 2
		  volumes: [{name: log, hostPath: {path: /var/lib/bootorder, type: DirectoryOrCreate}}]
		  containers:
		  - name: main
		    image: busybox:latest
		    imagePullPolicy: IfNotPresent
		    volumeMounts: [{name: log, mountPath: /log}]
		    readinessProbe:
		      tcpSocket: {host: 127.0.0.1, port: $2}
		      periodSeconds: 1
		    command:
		    - sh
		    - -c
		    - |
		      now() { cut -d' ' -f1 /proc/uptime; }
		      trap 'exit 0' TERM
		      echo "\$(now) $1 start" >>/log/starts.log
		      $wait_for
		      echo "\$(now) $1 serving" >>/log/starts.log
		      nc -ll -p $2 -e /bin/true &
		      wait
		POD
	} >"$5/$1.yaml"
}

# bootorder_install: the stand-ins, twice: with start-after (etcd, then the
# API server, then the controllers) and without, on other ports. Put in
# place while the daemon is stopped, they first start at the next boot.
bootorder_install() {
	m=/etc/kubernetes/manifests
	standin etcd 2379 "" "" $m
	standin kube-apiserver 6443 2379 etcd $m
	standin kube-controller-manager 10257 6443 kube-apiserver $m
	standin etcd-unordered 12379 "" "" $m
	standin kube-apiserver-unordered 16443 12379 "" $m
	standin kube-controller-manager-unordered 20257 16443 "" $m
}

restarts() { staticpodd ps | awk -v n="$1-appliance" '$2 == n { print $5 + 0 }'; }
# line_of PATTERN: the number of the first line of starts.log matching PATTERN.
line_of() { grep -n -x -E "[0-9.]+ $1" /var/lib/bootorder/starts.log | head -1 | cut -d: -f1; }
before() { # before A B: A's line comes before B's
	a=$(line_of "$1") b=$(line_of "$2")
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]
}

bootorder_check() {
	t0=$(uptime_s)
	for p in etcd kube-apiserver kube-controller-manager etcd-unordered kube-apiserver-unordered kube-controller-manager-unordered; do
		check "boot order: $p is Ready" until_ok 180 pod_ready $p-appliance
	done
	say "boot order: /var/lib/bootorder/starts.log:"
	sed 's/^/  /' /var/lib/bootorder/starts.log
	staticpodd ps | grep -E '^NAMESPACE|etcd|kube-'
	check "boot order: the API server started once etcd served" before "etcd serving" "kube-apiserver start"
	check "boot order: the controllers started once the API server served" before "kube-apiserver serving" "kube-controller-manager start"
	api=$(restarts kube-apiserver) kcm=$(restarts kube-controller-manager)
	api_u=$(restarts kube-apiserver-unordered) kcm_u=$(restarts kube-controller-manager-unordered)
	say "FIGURE restarts at boot of the API server stand-in: $api with start-after, $api_u without (controllers: $kcm with, $kcm_u without)"
	check "boot order: no restart of the API server with start-after" [ "$api" = 0 ]
	check "boot order: no restart of the controllers with start-after" [ "$kcm" = 0 ]
	check "boot order: without start-after the API server did crash at boot (the race is real)" [ "${api_u:-0}" -ge 1 ]
	say "TIMING boot order check took $(since "$t0")s after the check began"
}
