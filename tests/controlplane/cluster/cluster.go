//go:build linux

// Package cluster is what the control-plane test and benchmark share: the
// Kubernetes binaries tests/controlplane/build.sh builds, their images, a
// network namespace of the test's own for the control plane's host network,
// and kubeadm's certificates, kubeconfigs and static pod manifests generated
// into a temporary directory.
package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// The versions kubeadm v1.37.2 names for its control plane
// (kubeadm config images list --kubernetes-version v1.37.2).
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "3.7.0-0"
)

// Component is one of the four static pods kubeadm writes, with the image its
// manifest names and the binary in that image.
type Component struct {
	Name  string // pod name before "-<node>", manifest file without ".yaml", binary
	Image string
	Comm  string // the process's comm: its name, cut to 15 bytes by the kernel
}

// Components are the control plane's static pods, in the order kubeadm
// writes them.
var Components = []Component{
	{"etcd", "registry.k8s.io/etcd:" + EtcdVersion, "etcd"},
	{"kube-apiserver", "registry.k8s.io/kube-apiserver:" + KubernetesVersion, "kube-apiserver"},
	{"kube-controller-manager", "registry.k8s.io/kube-controller-manager:" + KubernetesVersion, "kube-controller"},
	{"kube-scheduler", "registry.k8s.io/kube-scheduler:" + KubernetesVersion, "kube-scheduler"},
}

// CacheDir is where build.sh puts the binaries of KubernetesVersion (bin/)
// and Images their image tarballs (images/).
func CacheDir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the cache directory: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "staticpodd", "controlplane", KubernetesVersion), nil
}

// BinDir is the directory of etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kubeadm and kubectl: $STATICPODD_CONTROLPLANE_BIN, or
// CacheDir()/bin. An error says how to build them.
func BinDir() (string, error) {
	dir := os.Getenv("STATICPODD_CONTROLPLANE_BIN")
	if dir == "" {
		cache, err := CacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(cache, "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubeadm", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("control plane binaries: %w (build them with make controlplane, or tests/controlplane/build.sh)", err)
		}
	}
	return dir, nil
}

// Images returns the image tarball of each component, in the order of
// Components: busybox plus the component's binary at /usr/local/bin, under
// the reference kubeadm's manifest names, as docker-archives. It builds with
// rootfs/mkimage (from the module at moduleRoot) those missing or older than
// their binary, into CacheDir()/images.
func Images(moduleRoot, binDir string) ([]string, error) {
	return images(moduleRoot, binDir, "docker", ".tar")
}

// OCIImages is Images as OCI archives (<name>.oci.tar): an OCI layout has the
// manifest digest signatures are over, and carries them.
func OCIImages(moduleRoot, binDir string) ([]string, error) {
	return images(moduleRoot, binDir, "oci", ".oci.tar")
}

// images builds the component images in mkimage's format, named <name><ext>.
func images(moduleRoot, binDir, format, ext string) ([]string, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var tars []string
	for _, c := range Components {
		bin := filepath.Join(binDir, c.Name)
		tar := filepath.Join(dir, c.Name+ext)
		tars = append(tars, tar)
		bi, err := os.Stat(bin)
		if err != nil {
			return nil, err
		}
		if ti, err := os.Stat(tar); err == nil && !ti.ModTime().Before(bi.ModTime()) {
			continue
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		cmd := exec.Command("go", "run", "./rootfs/mkimage", "-busybox", "/bin/busybox", "-ref", c.Image,
			"-add", bin+":/usr/local/bin/"+c.Name, "-cmd", c.Name, "-format", format, "-o", tar)
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build the image of %s: %v\n%s", c.Name, err, out)
		}
	}
	return tars, nil
}
