#!/bin/bash
# make test-guides: each guide of docs/guides that a booted machine tests, followed
# from a clean start. Usage: tests/guides/run.sh DEB IMAGE_TAR [install|appliance]...
#   install    docs/guides/install.md: the appliance's Debian base alone (no
#              staticpodd), booted; install-check.sh runs the guide inside.
#   appliance  docs/guides/appliance.md: the guide's commands run here (a base
#              debootstrapped, two manifests, two image archives, build.sh), its
#              image booted and its check.sh run inside.
# Both by default, one boot each.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DEB IMAGE_TAR [install|appliance]..." >&2; exit 2; }
deb=$(realpath "$1") image_tar=$(realpath "$2")
shift 2
[ $# -gt 0 ] || set -- install appliance
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$repo/_output/guides
log() { echo "[guides $(date +%T)] $*" >&2; }
mkdir -p "$out"

# guide COMMAND: runs one of a guide's commands, as written, in the current
# directory; guide_test.go holds these lines to the guide's.
guide() {
	echo "\$ $1" >&2
	eval "$1"
}

guide_install() {
	local t0=$(date +%s)
	"$repo/rootfs/appliance/build.sh" --clean "$out/clean.img"
	"$repo/rootfs/appliance/boot.sh" "$out/clean.img" "$here/install-check.sh" "$out/share-install" \
		"$deb" "$image_tar" "$here/install/web.yaml" "$here/install/typo.yaml"
	log "install.md: passed in $(($(date +%s) - t0))s"
}

# The reader's directory: the source tree as staticpodd/, the .deb make deb built,
# manifests/ and images/ of their own, check.sh. The images are busybox with a
# command each, one of them a gzipped OCI archive.
guide_appliance() {
	local t0=$(date +%s) w=$out/appliance
	rm -rf "$w"
	mkdir -p "$w/manifests" "$w/images"
	ln -s "$repo" "$w/staticpodd"
	cp "$deb" "$w/"
	cp "$here"/appliance/manifests/*.yaml "$w/manifests/"
	cp "$here/appliance/check.sh" "$w/"
	(cd "$repo" && go run ./rootfs/mkimage -ref example.com/web:1.0 -cmd 'httpd,-f,-p,127.0.0.1:8080,-h,/www' -o "$w/images/web.tar" &&
		go run ./rootfs/mkimage -ref example.com/clock:1.0 -format oci -compress gzip -o "$w/images/clock.tar.gz")
	cd "$w"
	guide 'debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,udev,kmod,procps,iproute2 bookworm base http://deb.debian.org/debian'
	guide 'staticpodd/rootfs/appliance/build.sh --deb staticpodd_*_amd64.deb --rootfs base --manifests manifests --images images --hostname edge1 --qemu -o appliance.img'
	guide 'staticpodd/rootfs/appliance/boot.sh appliance.img check.sh share'
	# What the guide says the reader sees in share/result-1.log.
	for pod in web-edge1 clock-edge1; do
		grep -q -E "^default +$pod +1/1 +Running " share/result-1.log || { log "appliance.md: $pod is not Running"; return 1; }
	done
	for ref in example.com/web:1.0 example.com/clock:1.0; do
		grep -q "^$ref " share/result-1.log || { log "appliance.md: $ref is not in the store"; return 1; }
	done
	cd "$repo"
	log "appliance.md: passed in $(($(date +%s) - t0))s"
}

for g in "$@"; do
	case $g in
	install | appliance) guide_$g ;;
	*) echo "$0: $g: want install or appliance" >&2; exit 2 ;;
	esac
done
