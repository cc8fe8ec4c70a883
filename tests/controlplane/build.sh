#!/usr/bin/env bash
# build.sh builds the Kubernetes control plane that the controlplane test runs
# under staticpodd — etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubeadm and kubectl — from the module in build/, statically,
# into ${XDG_CACHE_HOME:-$HOME/.cache}/staticpodd/controlplane/<version>/bin;
# "build.sh kubelet" builds the kubelet (make test-conformance runs it beside
# staticpodd) into .../controlplane/<version>/kubelet.
#
# The directory is keyed by the Kubernetes version and written whole or not at
# all: the binaries are built into a temporary directory beside it that is
# renamed into place, so a run that finds the directory pays nothing and an
# interrupted build leaves no half of one. It prints the directory.
set -euo pipefail

KUBE_VERSION=v1.37.2
ETCD_VERSION=3.7.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/staticpodd/controlplane/$KUBE_VERSION
out=$cache/bin
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubeadm kubectl)
pkgs=(./etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubectl)
# "build.sh kubelet" builds the kubelet alone (for make test-conformance) into
# a directory of its own beside bin, kept the same way; "build.sh e2e_node"
# the kubelet's node e2e test binary, e2e_node.test (for make test-node-e2e).
case "${1:-}" in
kubelet)
	out=$cache/kubelet
	bins=(kubelet)
	pkgs=(k8s.io/kubernetes/cmd/kubelet)
	;;
e2e_node)
	out=$cache/e2e_node
	bins=(e2e_node.test)
	pkgs=(k8s.io/kubernetes/test/e2e_node)
	;;
esac

complete() {
	local b
	for b in "${bins[@]}"; do
		[ -x "$out/$b" ] || return 1
	done
}

if complete; then
	echo "$out"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$out.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The version variables Kubernetes' own build sets (hack/lib/version.sh), so
# that kubeadm, kubectl and the components report $KUBE_VERSION: kubeadm
# compares them.
major=${KUBE_VERSION#v}
minor=${major#*.}
minor=${minor%%.*}
major=${major%%.*}
build_date=$(date -u ${SOURCE_DATE_EPOCH:+--date=@$SOURCE_DATE_EPOCH} +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION"
	ldflags+=" -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

cd "$here/build"
echo "building ${bins[*]} $KUBE_VERSION into $out" >&2
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-p=2"
if [ "${bins[0]}" = e2e_node.test ]; then
	# A test binary: go test -c builds one package's at a time.
	nice -n 5 go test -c -trimpath -ldflags "$ldflags" -o "$tmp/e2e_node.test" "${pkgs[@]}"
else
	nice -n 5 go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
fi

if [ -x "$tmp/etcd" ]; then
	# The etcd that kubeadm names is the release this module requires.
	got=$("$tmp/etcd" --version | sed -n 's/^etcd Version: //p')
	if [ "$got" != "$ETCD_VERSION" ]; then
		echo "build.sh: etcd reports version '$got', want $ETCD_VERSION" >&2
		exit 1
	fi
	got=$("$tmp/kubeadm" version -o short)
	if [ "$got" != "$KUBE_VERSION" ]; then
		echo "build.sh: kubeadm reports version '$got', want $KUBE_VERSION" >&2
		exit 1
	fi
elif [ -x "$tmp/kubelet" ]; then
	got=$("$tmp/kubelet" --version)
	if [ "$got" != "Kubernetes $KUBE_VERSION" ]; then
		echo "build.sh: the kubelet reports version '$got', want Kubernetes $KUBE_VERSION" >&2
		exit 1
	fi
fi

chmod 755 "$tmp" # mktemp made it 0700
rm -rf "$out"
mv -T "$tmp" "$out"
trap - EXIT
echo "$out"
