#!/bin/bash
# Builds an appliance: a Debian root filesystem with systemd as PID 1 and the
# staticpodd .deb installed and enabled, static pod manifests in
# /etc/kubernetes/manifests and image archives in the import folder (imported at
# the daemon's first start), as an ext4 image. boot.sh boots such an image under
# qemu with the kernel of /boot.
#
# Usage:
#   rootfs/appliance/build.sh --deb DEB [--rootfs DIR] [--manifests DIR] [--manifest FILE]...
#       [--images DIR] [--image FILE]... [--hostname NAME] [--qemu] -o OUT_IMG
#   rootfs/appliance/build.sh DEB IMAGE_TAR MANIFEST OUT_IMG   (the test appliance)
#   rootfs/appliance/build.sh --clean OUT_IMG   (the cached base alone, no staticpodd)
#   rootfs/appliance/build.sh --base            (only the cached base)
#
# Without --rootfs the base is Debian bookworm (minbase) made by debootstrap and
# made bootable under qemu with the host's kernel (its modules, an fstab, root's
# console login, the test driver). That part (the slow one, about a minute) is
# cached outside the repository in
# ${XDG_CACHE_HOME:-$HOME/.cache}/staticpodd/appliance/base-<hash>, keyed by a
# hash of its recipe (the package list, the kernel version and configure_base);
# only the staticpodd layer is redone on each build. --rootfs DIR starts from a
# root filesystem of your own instead (a debootstrapped directory, say), which is
# copied, never changed; --qemu makes it bootable by boot.sh as the cached base is.
set -euo pipefail

usage() {
	cat >&2 <<'USAGE'
usage: build.sh --deb DEB [--rootfs DIR] [--manifests DIR] [--manifest FILE]...
                [--images DIR] [--image FILE]... [--hostname NAME] [--qemu] -o OUT_IMG
       build.sh DEB IMAGE_TAR MANIFEST OUT_IMG
       build.sh --clean OUT_IMG
       build.sh --base

  --deb DEB         the staticpodd .deb to install (make deb)
  --rootfs DIR      the root filesystem to start from (systemd and dpkg in it), copied;
                    default: Debian bookworm minbase, debootstrapped once and cached
  --manifests DIR   every *.yaml, *.yml and *.json in DIR goes to /etc/kubernetes/manifests
  --manifest FILE   one manifest; repeatable
  --images DIR      every file in DIR (image archives) goes to the import folder,
                    /var/lib/staticpodd/images/import, imported at the first start
  --image FILE      one image archive; repeatable
  --hostname NAME   the machine's host name, hence the node name in pod names (<pod>-NAME)
  --qemu            make a --rootfs bootable by boot.sh with this host's kernel: its
                    modules, an fstab, root's password-less console login and the test
                    driver (the cached base has them); not for an image you ship
  -o OUT_IMG        the ext4 image to write
  --clean OUT_IMG   the cached base alone, no staticpodd: a clean machine to install on
  --base            only build the cached base
USAGE
}
die() { echo "build.sh: $*" >&2; exit 2; }

base_only=no clean=no qemu=no
deb='' rootfs='' hostname='' out=''
manifests=() images=()
# one_dir WHAT DIR PATTERN...: the regular files of DIR matching a PATTERN, into
# $found; none is an error naming WHAT.
one_dir() {
	local what=$1 dir=$2 f p
	shift 2
	[ -d "$dir" ] || die "$dir: not a directory"
	found=()
	for f in "$dir"/*; do
		[ -f "$f" ] || continue
		for p in "$@"; do
			case $(basename "$f") in $p) found+=("$f"); break ;; esac
		done
	done
	[ ${#found[@]} -gt 0 ] || die "$dir: no $what in it"
}
case ${1:-} in
--base)
	[ $# -eq 1 ] || { usage; exit 2; }
	base_only=yes ;;
--clean)
	[ $# -eq 2 ] || { usage; exit 2; }
	clean=yes out=$2 ;;
-h | --help) usage; exit 0 ;;
-*)
	while [ $# -gt 0 ]; do
		opt=$1
		case $opt in
		--qemu) qemu=yes; shift; continue ;;
		-h | --help) usage; exit 0 ;;
		--deb | --rootfs | --manifests | --manifest | --images | --image | --hostname | -o) ;;
		*) usage; die "unknown option $opt" ;;
		esac
		[ $# -ge 2 ] || die "$opt needs a value"
		val=$2
		shift 2
		case $opt in
		--deb) deb=$val ;;
		--rootfs) rootfs=$val ;;
		--manifests) one_dir 'manifest (*.yaml, *.yml, *.json)' "$val" '*.yaml' '*.yml' '*.json'; manifests+=("${found[@]}") ;;
		--manifest) manifests+=("$val") ;;
		--images) one_dir 'image archive' "$val" '*'; images+=("${found[@]}") ;;
		--image) images+=("$val") ;;
		--hostname) hostname=$val ;;
		-o) out=$val ;;
		esac
	done ;;
*)
	[ $# -eq 4 ] || { usage; exit 2; }
	deb=$1 images=("$2") manifests=("$3") out=$4 ;;
esac
if [ $base_only = no ]; then
	[ -n "$out" ] || die "no output image: give -o OUT_IMG"
	[ $clean = yes ] || [ -n "$deb" ] || die "no package: give the staticpodd .deb with --deb (make deb builds it in _output/pkg)"
	[ -z "$deb" ] || [ -f "$deb" ] || die "--deb $deb: no such file"
	for f in "${manifests[@]}" "${images[@]}"; do
		[ -f "$f" ] || die "$f: no such file"
	done
	# Two files of one name would land on the same path in the image.
	dup=$(for f in "${manifests[@]}" "${images[@]}"; do basename "$f"; done | sort | uniq -d | head -1)
	[ -z "$dup" ] || die "two files named $dup: one would replace the other in the image"
	if [ -n "$hostname" ]; then
		# The node name is the host name, lower-cased, in every pod's name.
		[[ $hostname =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] || die "--hostname $hostname: want a DNS label (lower-case letters, digits, '-', at most 63)"
	fi
	if [ -n "$rootfs" ]; then
		[ -d "$rootfs" ] || die "--rootfs $rootfs: not a directory"
		[ -x "$rootfs/lib/systemd/systemd" ] || [ -x "$rootfs/usr/lib/systemd/systemd" ] ||
			die "--rootfs $rootfs: no systemd in it (lib/systemd/systemd): the package's unit needs systemd as init (debootstrap --include=systemd,systemd-sysv,dbus)"
		[ -x "$rootfs/usr/bin/dpkg" ] || die "--rootfs $rootfs: no dpkg in it (usr/bin/dpkg): the .deb is installed with it (a Debian or Ubuntu root filesystem)"
	fi
fi
here=$(cd "$(dirname "$0")" && pwd)

SUITE=bookworm
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# busybox-static gives the checks wget and nc; dbus is what the systemd cgroup
# driver talks to.
PKGS=systemd,systemd-sysv,dbus,udev,kmod,procps,util-linux,iproute2,busybox-static
KVER=${KVER:-$(ls /boot/vmlinuz-* 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -V | tail -1)}
# bootable: the image is one boot.sh boots, with the kernel KVER of /boot.
bootable=yes
[ -z "$rootfs" ] || [ $qemu = yes ] || bootable=no
[ $bootable = no ] || [ -n "$KVER" ] || { echo "$0: no kernel in /boot: apt-get install -y linux-image-amd64" >&2; exit 1; }

cache=${XDG_CACHE_HOME:-$HOME/.cache}/staticpodd/appliance
# APPLIANCE_SYSTEMD=backports: systemd from bookworm-backports (254, where 252 is
# bookworm's), for what only systemd >= 253/254 has (Type=notify-reload,
# DelegateSubgroup=). Its base is cached apart, so neither drops the other.
APPLIANCE_SYSTEMD=${APPLIANCE_SYSTEMD:-bookworm}
case $APPLIANCE_SYSTEMD in
bookworm) ;;
backports) cache=$cache-backports ;;
*) echo "$0: APPLIANCE_SYSTEMD=$APPLIANCE_SYSTEMD: want bookworm or backports" >&2; exit 2 ;;
esac

log() { echo "[appliance $(date +%T)] $*" >&2; }

# configure_base makes a debootstrapped tree bootable under qemu with the host's
# kernel and adds the test driver unit.
configure_base() {
	local R=$1
	# The kernel comes from /boot, so its modules come from the host too (overlay,
	# 9p, veth, netfilter are modules in Debian); only the parts a server needs.
	local M=usr/lib/modules/$KVER
	mkdir -p "$R/$M/kernel/drivers"
	(cd / && tar -cf - $M/modules.order $M/modules.builtin $M/modules.builtin.modinfo \
		$M/kernel/{fs,net,lib,crypto,arch,block,mm,virt} \
		$M/kernel/drivers/{virtio,block,char,net,md,tty,scsi} 2>/dev/null) | tar -C "$R" -xf -
	depmod -b "$R" "$KVER"

	echo appliance >"$R/etc/hostname"
	printf '127.0.0.1\tlocalhost\n127.0.1.1\tappliance\n' >"$R/etc/hosts"
	chroot "$R" passwd -d root >/dev/null
	mkdir -p "$R/mnt/host"
	cat >"$R/etc/fstab" <<'FSTAB'
/dev/vda   /          ext4  rw,errors=remount-ro  0 1
hostshare  /mnt/host  9p    trans=virtio,version=9p2000.L,msize=262144,nofail,x-systemd.device-timeout=10s  0 0
FSTAB
	mkdir -p "$R/etc/systemd/system/serial-getty@ttyS0.service.d"
	cat >"$R/etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf" <<'UNIT'
[Service]
ExecStart=
ExecStart=-/sbin/agetty --autologin root --keep-baud 115200,57600,38400,9600 - $TERM
UNIT
	install -m 0755 "$here/check-driver" "$R/usr/local/sbin/check-driver"
	cat >"$R/etc/systemd/system/check-driver.service" <<'UNIT'
[Unit]
Description=Run the host's check script from /mnt/host, then reboot or power off
After=multi-user.target
RequiresMountsFor=/mnt/host
ConditionPathExists=/mnt/host/check.sh

[Service]
# Type=exec, not oneshot: a oneshot is part of the boot transaction and
# `systemctl is-system-running --wait` inside it would never return.
Type=exec
ExecStart=/usr/local/sbin/check-driver
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
UNIT
	chroot "$R" systemctl enable check-driver.service
	# No network card: do not wait for one.
	chroot "$R" systemctl mask systemd-networkd-wait-online.service 2>/dev/null || true
}

# systemd_backports installs systemd and what goes with it from
# bookworm-backports into the tree R.
systemd_backports() {
	local R=$1
	echo "deb $MIRROR $SUITE-backports main" >"$R/etc/apt/sources.list.d/backports.list"
	mount -t proc proc "$R/proc"
	local rc=0
	{ chroot "$R" apt-get update -q &&
		chroot "$R" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			-t "$SUITE-backports" systemd systemd-sysv udev libsystemd0 libudev1; } >"$R/../backports.log" 2>&1 || rc=$?
	umount "$R/proc"
	[ $rc = 0 ] || { tail -20 "$R/../backports.log" >&2; return 1; }
	rm "$R/etc/apt/sources.list.d/backports.list"
}

# The base's recipe: what debootstrap installs and configure_base does to it.
# (bookworm's recipe is hashed as it always was, so that its cached base stays valid.)
if [ "$APPLIANCE_SYSTEMD" = bookworm ]; then
	key=$( (declare -f configure_base; echo "$KVER $SUITE $PKGS $MIRROR") | sha256sum | cut -c1-16)
else
	key=$( (declare -f configure_base systemd_backports; echo "$KVER $SUITE $PKGS $MIRROR $APPLIANCE_SYSTEMD") | sha256sum | cut -c1-16)
fi
base=$cache/base-$key

if [ -z "$rootfs" ] && [ ! -e "$base/.built" ]; then
	command -v debootstrap >/dev/null || { echo "$0: debootstrap is missing: apt-get install -y debootstrap" >&2; exit 1; }
	t0=$(date +%s)
	# A finished debootstrap is kept even when what follows fails.
	if [ ! -e "$base/.debootstrapped" ]; then
		rm -rf "$base"
		mkdir -p "$base"
		log "debootstrap $SUITE into $base (once per recipe)"
		debootstrap --variant=minbase --include="$PKGS" "$SUITE" "$base/rootfs" "$MIRROR" >"$base/debootstrap.log" 2>&1 ||
			{ tail -20 "$base/debootstrap.log" >&2; exit 1; }
		touch "$base/.debootstrapped"
	fi
	if [ "$APPLIANCE_SYSTEMD" = backports ]; then
		log "systemd from $SUITE-backports"
		systemd_backports "$base/rootfs"
	fi
	configure_base "$base/rootfs"
	rm -rf "$base/rootfs/var/cache/apt/archives"/*.deb "$base/rootfs/var/lib/apt/lists"/*_Packages
	touch "$base/.built"
	log "base rootfs built in $(($(date +%s) - t0))s"
	# Older bases are of another recipe: drop them.
	for old in "$cache"/base-*; do [ "$old" = "$base" ] || rm -rf "$old"; done
fi

[ $base_only = no ] || exit 0

# The staticpodd layer, on a copy of the base.
mkdir -p "$cache"
work=$(mktemp -d "$cache/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -n "$rootfs" ]; then
	log "copying $rootfs"
	cp -a "$rootfs/." "$work/rootfs"
	[ $qemu = no ] || configure_base "$work/rootfs"
else
	cp -a "$base/rootfs" "$work/rootfs"
fi
R=$work/rootfs
if [ $bootable = yes ]; then
	# The check-driver may have changed without changing the base's recipe hash
	# when only it was edited: always take the current one.
	install -m 0755 "$here/check-driver" "$R/usr/local/sbin/check-driver"
	# The heartbeat (a line on the console every 30s, see heartbeat) is part of this
	# layer, not of the cached base, so that changing it does not redo debootstrap.
	install -m 0755 "$here/heartbeat" "$R/usr/local/sbin/heartbeat"
	cat >"$R/etc/systemd/system/heartbeat.service" <<'UNIT'
[Unit]
Description=A line on the console every 30s while the guest runs
DefaultDependencies=no
After=systemd-journald.service
Conflicts=shutdown.target
Before=shutdown.target

[Service]
ExecStart=/usr/local/sbin/heartbeat

[Install]
WantedBy=sysinit.target
UNIT
	chroot "$R" systemctl enable heartbeat.service 2>/dev/null
fi
if [ -n "$hostname" ]; then
	echo "$hostname" >"$R/etc/hostname"
	printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$hostname" >"$R/etc/hosts"
fi
if [ -n "$deb" ]; then
	cp "$deb" "$R/tmp/staticpodd.deb"
	chroot "$R" dpkg -i /tmp/staticpodd.deb >&2
	rm "$R/tmp/staticpodd.deb"
	chroot "$R" systemctl is-enabled staticpodd.service >/dev/null
	if [ ${#manifests[@]} -gt 0 ]; then
		# A manifest the daemon would refuse fails the build, not the first boot:
		# the package's own binary validates them, for the image's node name.
		node=$(tr 'A-Z' 'a-z' <"$R/etc/hostname" 2>/dev/null || echo localhost)
		"$R/usr/bin/staticpodd" validate --hostname-override "$node" "${manifests[@]}" >&2 ||
			die "a manifest does not validate (above)"
	fi
	for f in "${manifests[@]}"; do
		install -D -m 0600 "$f" "$R/etc/kubernetes/manifests/$(basename "$f")"
	done
	for f in "${images[@]}"; do
		install -D -m 0600 "$f" "$R/var/lib/staticpodd/images/import/$(basename "$f")"
	done
fi

mkdir -p "$(dirname "$out")"
mb=$(($(du -sm "$R" | cut -f1) + 512))
rm -f "$out.tmp"
truncate -s "${mb}M" "$out.tmp"
mkfs.ext4 -q -F -L root -d "$R" "$out.tmp"
mv "$out.tmp" "$out"
if [ $bootable = yes ]; then
	log "built $out (kernel $KVER)"
	echo "$KVER" >"$out.kver"
else
	log "built $out"
	rm -f "$out.kver"
fi
