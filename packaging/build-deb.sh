#!/bin/sh
# Build a .deb of staticpodd with dpkg-deb alone (no debhelper, no nfpm).
# Usage: packaging/build-deb.sh BINARY VERSION [OUTDIR]
#   BINARY   the built staticpodd binary
#   VERSION  Debian version, e.g. 0.1.0
#   OUTDIR   where the .deb goes (default: the current directory)
# ARCH overrides the architecture (default: dpkg --print-architecture).
set -eu

[ $# -ge 2 ] || { echo "usage: $0 BINARY VERSION [OUTDIR]" >&2; exit 2; }
bin=$1 version=$2 outdir=${3:-.}
arch=${ARCH:-$(dpkg --print-architecture)}
here=$(cd "$(dirname "$0")" && pwd)

root=$(mktemp -d)
chmod 0755 "$root"
trap 'rm -rf "$root"' EXIT

install -D -m 0755 "$bin" "$root/usr/bin/staticpodd"
install -D -m 0644 "$here/staticpodd.service" "$root/lib/systemd/system/staticpodd.service"
install -D -m 0644 "$here/staticpodd.tmpfiles" "$root/usr/lib/tmpfiles.d/staticpodd.conf"
install -D -m 0644 "$here/config.yaml" "$root/etc/staticpodd/config.yaml"
install -D -m 0644 "$here/notify-reload.conf" "$root/usr/share/doc/staticpodd/examples/notify-reload.conf"
install -D -m 0644 "$here/README.md" "$root/usr/share/doc/staticpodd/README.packaging.md"

mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CONTROL
Package: staticpodd
Version: $version
Architecture: $arch
Maintainer: staticpodd maintainers <staticpodd@localhost>
Section: admin
Priority: optional
Installed-Size: $(du -sk "$root" | cut -f1)
Description: run Kubernetes static pods without a kubelet
 staticpodd reads Pod manifests from a directory or a URL, as the kubelet does,
 and runs them as OCI containers through libcontainer, under systemd.
CONTROL
echo /etc/staticpodd/config.yaml >"$root/DEBIAN/conffiles"

# Upgrades restart the daemon, never the pods (KillMode=process).
cat >"$root/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
	systemd-tmpfiles --create staticpodd.conf || true
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload
		systemctl try-restart staticpodd.service
	fi
fi
SCRIPT
# Removing the package stops the daemon; running pods are left alone.
cat >"$root/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl stop staticpodd.service || true
fi
SCRIPT
cat >"$root/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
SCRIPT
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

mkdir -p "$outdir"
dpkg-deb --root-owner-group --build "$root" "$outdir/staticpodd_${version}_${arch}.deb"
