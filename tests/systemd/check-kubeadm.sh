#!/bin/sh
# The assertions of `make test-systemd-kubeadm`, run as root inside the booted
# appliance (systemd as PID 1; staticpodd's .deb installed and enabled, its web pod
# running) by its check-driver, in one boot: installing staticpodd-kubeadm hands the
# machine from staticpodd.service to kubelet.service without touching the pod;
# kubeadm's preflight reaches the CRI through staticpodd-cri.socket before the
# kubelet has its configuration; kubeadm's own kubelet-start phase (the real kubeadm,
# which writes the kubelet's files and runs `systemctl restart kubelet`) starts
# staticpodd as its kubelet; and `kubeadm reset`, which stops the kubelet before it
# removes the pods through the CRI, removes them, leaving nothing behind.
# Exit 0: passed; else failed. Every wait is bounded and for a state the system
# reports.
fail=0
share=/mnt/host
say() { echo "[$(cut -d' ' -f1 /proc/uptime)s] $*"; }
check() { # check DESCRIPTION COMMAND...
	d=$1; shift
	if "$@"; then say "ok   $d"; else say "FAIL $d"; fail=1; fi
}
until_ok() { # until_ok SECONDS COMMAND...
	t=$1; shift
	end=$(($(date +%s) + t))
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.2
	done
}
is() { [ "$(systemctl "$1" "$2" 2>/dev/null)" = "$3" ]; }
web_running() { staticpodd ps 2>/dev/null | grep -E '^default +web-appliance .* Running ' >/dev/null; }
# GET PORT PATH: the body (Debian's static busybox wget crashes here; bash's /dev/tcp does not).
get() {
	timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf 'GET $2 HTTP/1.0\r\n\r\n' >&3 && cat <&3" 2>/dev/null | sed '1,/^\r$/d'
}
healthz_ok() { [ "$(get 10248 /healthz)" = ok ]; }
no_healthz() { ! healthz_ok; }

check "staticpodd.service runs the web pod" until_ok 120 web_running
httpd=$(pgrep -x httpd | head -1)
say "httpd pid $httpd"

deb=$(ls $share/staticpodd-kubeadm_*.deb)
check "dpkg -i staticpodd-kubeadm" dpkg -i "$deb"
check "staticpodd.service stopped" is is-active staticpodd inactive
check "staticpodd.service disabled" is is-enabled staticpodd disabled
# kubeadm's preflight (Service-Kubelet) wants it enabled.
check "kubelet.service enabled" is is-enabled kubelet enabled
check "kubelet.service not started before kubeadm configures the node" is is-active kubelet inactive
check "the pod kept running" kill -0 "$httpd"
check "staticpodd-cri.socket enabled" is is-enabled staticpodd-cri.socket enabled
check "staticpodd-cri.socket listening" is is-active staticpodd-cri.socket active
check "its socket is root's only" [ "$(stat -c %a:%U /run/staticpodd/cri.sock)" = 600:root ]
check "in the run dir, root's only" [ "$(stat -c %a /run/staticpodd)" = 700 ]

# kubeadm init's preflight calls the CRI (its status and version, the images)
# before it has written /var/lib/kubelet/config.yaml: the call starts
# kubelet.service, which serves the CRI alone. This appliance is no kubeadm-sized
# machine (CPUs, memory, swap, no images to pull), so every error is ignored and
# the CRI's two checks must give no warning.
out=/tmp/preflight.out
check "kubeadm init phase preflight" sh -c "$share/kubeadm init phase preflight --config $share/kubeadm.yaml --dry-run --ignore-preflight-errors=all >$out 2>&1"
sed 's/^/  preflight| /' $out
check "preflight: CRI and ContainerRuntimeVersion pass" sh -c "! grep -E 'WARNING (CRI|ContainerRuntimeVersion)' $out"
check "the CRI call started kubelet.service" until_ok 30 is is-active kubelet active
check "which serves the CRI only until kubeadm writes its config" until_ok 10 sh -c \
	'journalctl -u kubelet | grep -q "/var/lib/kubelet/config.yaml is not there yet (kubeadm init or join writes it): serving the CRI only"'
check "no healthz port without the config" no_healthz
check "the pod kept, not removed by a daemon without its manifests" kill -0 "$httpd"
check "kubelet --version is kubeadm's KubeletVersion line" [ "$(kubelet --version)" = "Kubernetes v1.37.2" ]

# What kubeadm init does up to and with kubelet-start.
for phase in "certs ca" "kubeconfig kubelet" "kubelet-start"; do
	# shellcheck disable=SC2086
	check "kubeadm init phase $phase" $share/kubeadm init phase $phase --config $share/kubeadm.yaml
done
check "kubelet.service active after kubeadm's restart" until_ok 60 is is-active kubelet active
check "the healthz port answers ok (kubeadm's wait)" until_ok 60 healthz_ok
mainpid() { systemctl show -p MainPID --value kubelet; }
cmdline() { tr '\0' ' ' </proc/"$(mainpid)"/cmdline; }
say "kubelet.service's command line: $(cmdline)"
check "kubelet.service runs /usr/bin/staticpodd" [ "$(readlink /proc/"$(mainpid)"/exe)" = /usr/bin/staticpodd ]
check "as kubelet, with kubeadm's drop-in and flags" [ "$(cmdline)" = "/usr/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
--kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml --node-labels=example.com/role=edge " ]
check "its journal is kubelet's" until_ok 10 sh -c 'journalctl -u kubelet | grep -q "serving the healthz port"'
check "kubeadm's flags all taken: no unknown flag" sh -c '! journalctl -u kubelet | grep -q "unknown flag"'
# clusterDNS, clusterDomain: the fields of kubeadm's config.yaml staticpodd does not honour.
check "two fields of kubeadm's config.yaml ignored, no more" [ "$(journalctl -u kubelet | grep -c 'configuration field ignored')" = 2 ]
check "the web pod adopted, not restarted" [ "$(pgrep -x httpd | head -1)" = "$httpd" ]
check "staticpodd ps sees it under kubelet.service" web_running
check "systemctl reload kubelet" systemctl reload kubelet
check "systemctl stop kubelet" systemctl stop kubelet
check "the pod outlives the stop" kill -0 "$httpd"

# kubeadm reset stops kubelet.service, then removes every pod through the CRI, then
# /etc/kubernetes/manifests and /var/lib/kubelet: its CRI call starts kubelet.service
# again, which adopts the pod and removes it.
wcg=/sys/fs/cgroup$(cut -d: -f3 /proc/"$httpd"/cgroup)
say "web's cgroup $wcg"
out=/tmp/reset.out
check "kubeadm reset -f" sh -c "$share/kubeadm reset -f --cri-socket unix:///run/staticpodd/cri.sock >$out 2>&1"
sed 's/^/  reset| /' $out
check "reset: no failure to remove containers" sh -c "! grep -q 'Failed to remove containers' $out"
check "reset: its CRI call started kubelet.service again" is is-active kubelet active
check "reset: the pod stopped through the CRI" sh -c "journalctl -u kubelet | grep -q 'stopping pod through the CRI'"
check "reset: the pod's process gone" sh -c "! kill -0 $httpd"
check "reset: staticpodd has no pod left" sh -c "staticpodd ps >/tmp/ps.out && ! grep -q web-appliance /tmp/ps.out"
check "reset: the pod's cgroup gone" until_ok 30 [ ! -d "$wcg" ]
check "reset: no pod directory left" sh -c '[ -z "$(ls -A /var/lib/staticpodd/pods 2>/dev/null)" ]'
check "reset: no mount of staticpodd's or the kubelet's left" sh -c \
	"! awk '\$5 ~ \"^/(var/lib/staticpodd|run/staticpodd|var/lib/kubelet)/\"' /proc/self/mountinfo | grep ."
check "reset: /etc/kubernetes/manifests emptied" sh -c '[ -z "$(ls -A /etc/kubernetes/manifests)" ]'
check "reset: /var/lib/kubelet emptied" sh -c '[ -z "$(ls -A /var/lib/kubelet 2>/dev/null)" ]'
# The CRI holds a stopped pod 10 s before its manifest would make it again; the
# manifest went within that time.
check "reset: not made again after the stop's hold" sh -c "sleep 12; ! pgrep -x httpd"

check "dpkg -r staticpodd-kubeadm" dpkg -r staticpodd-kubeadm
check "/usr/bin/kubelet gone" [ ! -e /usr/bin/kubelet ]
check "staticpodd-cri.socket gone" sh -c '! systemctl is-active -q staticpodd-cri.socket && ! systemctl is-enabled -q staticpodd-cri.socket'
check "kubelet.service stopped" sh -c '! systemctl is-active -q kubelet'
check "staticpodd.service enabled again" is is-enabled staticpodd enabled
exit $fail
