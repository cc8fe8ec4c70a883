#!/bin/sh
# docs/guides/install.md, run inside a clean machine (the appliance's Debian base
# booted under systemd, no staticpodd) by rootfs/appliance/check-driver, with the
# .deb, busybox.tar and the guide's manifests in /mnt/host. Every line
# `guide '...'` runs one command of the guide as written (guide_test.go holds the
# two to each other); the checks after it assert what the guide says the reader
# sees. Exit 0: passed; anything else: failed.
fail=0
say() { echo "[$(cut -d' ' -f1 /proc/uptime)s] $*"; }
ok() { say "ok   $*"; }
bad() { say "FAIL $*"; fail=1; }
# guide COMMAND: runs one of the guide's commands, as written, in the shell; its
# output (stdout and stderr) in $out, shown indented.
guide() {
	say "\$ $1"
	out=$(eval "$1" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed 's/^/    /'
	[ $rc = 0 ] || bad "exit status $rc: $1"
}
# shows PATTERN: the last command's output has a line matching the ERE PATTERN.
shows() {
	if printf '%s\n' "$out" | grep -q -E -- "$1"; then ok "shows /$1/"; else bad "does not show /$1/"; fi
}
lacks() {
	if printf '%s\n' "$out" | grep -q -E -- "$1"; then bad "shows /$1/"; else ok "lacks /$1/"; fi
}
# until_ok SECONDS COMMAND...: polls COMMAND every 0.5s until it succeeds.
until_ok() {
	t=$1; shift
	end=$(($(date +%s) + t))
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.5
	done
}
check() { # check DESCRIPTION COMMAND...
	d=$1; shift
	if "$@"; then ok "$d"; else bad "$d"; fi
}
node=$(hostname)

cd /mnt/host || exit 1
check "a clean machine: no staticpodd" sh -c '! command -v staticpodd'

# Install
guide 'apt install ./staticpodd_*_amd64.deb'
check "installed" dpkg-query -W staticpodd
guide 'systemctl enable --now staticpodd'
check "active" until_ok 60 sh -c '[ "$(systemctl is-active staticpodd)" = active ]'
guide 'systemctl status staticpodd'
shows 'Active: active \(running\)'
shows 'Status: "'
guide 'staticpodd check'
shows '^all start-up checks passed$'

# An image
guide 'staticpodd images import busybox.tar'
shows 'busybox:latest'
guide 'staticpodd images ls'
shows '^docker.io/library/busybox:latest '

# A pod
guide 'cp web.yaml /etc/kubernetes/manifests/'
check "web runs" until_ok 60 sh -c "staticpodd ps | grep -q -E '^default +web-$node +1/1 +Running '"
guide 'staticpodd ps'
shows "^NAMESPACE +NAME +READY +STATUS"
shows "^default +web-$node +1/1 +Running "
guide 'staticpodd logs web-$(hostname)'
shows 'response:200'
guide 'staticpodd events'
shows "Started"
shows "web-$node"
guide 'journalctl -u staticpodd POD_NAME=web-$(hostname)'
shows "Container started"
# Only that pod's lines: not the daemon's own.
lacks "serving the"

# A pod that does not start
guide 'cp typo.yaml /etc/kubernetes/manifests/'
check "typo waits" until_ok 60 sh -c "staticpodd ps | grep -q -E '^default +typo-$node .*(ErrImagePull|ImagePullBackOff)'"
guide 'staticpodd ps'
shows "^default +typo-$node +0/1 +(ErrImagePull|ImagePullBackOff) "
guide 'staticpodd events'
shows "Failed.*busybox:1.37"
guide 'rm /etc/kubernetes/manifests/typo.yaml'
check "typo is gone" until_ok 60 sh -c "! staticpodd ps | grep -q typo-"

# Remove a pod
guide 'rm /etc/kubernetes/manifests/web.yaml'
check "web is gone" until_ok 60 sh -c "! staticpodd ps | grep -q web-"
check "its httpd too" sh -c '! pgrep -x httpd'
guide 'staticpodd ps'
shows '^No pods\.$'

# Reload
pid=$(systemctl show -p MainPID --value staticpodd)
guide 'sed -i "s/^fileCheckFrequency: .*/fileCheckFrequency: 10s/" /etc/staticpodd/config.yaml'
guide 'systemctl reload staticpodd'
check "the same daemon" [ "$(systemctl show -p MainPID --value staticpodd)" = "$pid" ]
check "reloaded" until_ok 20 sh -c "journalctl -u staticpodd -o cat --no-pager | grep -q 'configuration change applied'"
guide 'journalctl -u staticpodd -n 3'
shows "reload: configuration change applied"

exit $fail
