#!/usr/bin/env bash
# build.sh builds crictl, from cri-tools, that the CRI test runs against
# staticpodd's CRI socket, from the module in build/, statically, into
# ${XDG_CACHE_HOME:-$HOME/.cache}/staticpodd/crictl/<version>, and prints that
# directory.
#
# As tests/controlplane/build.sh does: the directory is keyed by the version
# and written whole or not at all (built into a temporary directory beside it
# that is renamed into place), so a run that finds it pays nothing and an
# interrupted build leaves no half of one.
set -euo pipefail

CRICTL_VERSION=v1.37.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/staticpodd/crictl
out=$cache/$CRICTL_VERSION

if [ -x "$out/crictl" ]; then
	echo "$out"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$out.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cd "$here/build"
echo "building crictl $CRICTL_VERSION into $out" >&2
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-p=2"
# The version variable cri-tools' own Makefile sets, so that crictl --version
# says which release this is.
nice -n 5 go build -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
	-o "$tmp/" sigs.k8s.io/cri-tools/cmd/crictl

got=$("$tmp/crictl" --version)
if [ "$got" != "crictl version $CRICTL_VERSION" ]; then
	echo "build.sh: crictl reports version '$got', want $CRICTL_VERSION" >&2
	exit 1
fi

chmod 755 "$tmp" # mktemp made it 0700
rm -rf "$out"
mv -T "$tmp" "$out"
trap - EXIT
echo "$out"
