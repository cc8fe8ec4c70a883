// Package oci runs podspec pods as OCI containers through runc's libcontainer,
// in-process. Each container is watched by a small monitor process (this binary
// re-executed) so containers, their logs and their exit codes outlive the daemon.
package oci

import (
	"log/slog"
	"sync"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/spec"
)

// DefaultCgroupRoot is the cgroupfs parent of every pod cgroup.
const DefaultCgroupRoot = "/staticpodd"

// Image is what the runtime needs to know about an image once its rootfs is ready.
type Image struct {
	ID     string // sha256:… of the image config
	Config imagespec.ImageConfig
}

// ImageStore gives each container a writable root filesystem over an image.
type ImageStore interface {
	// Prepare mounts a writable overlay rootfs for key over image ref and returns
	// its path and the image. An image missing from the store is an error
	// wrapping podspec.ErrImageNotPresent.
	Prepare(key, ref string) (rootfs string, img Image, err error)
	// Release unmounts the rootfs of key and removes its writable layer. Releasing
	// an unknown key is not an error.
	Release(key string) error
}

// Config configures a Runtime.
type Config struct {
	// RunDir holds pod and container state (tmpfs, lost on reboot like the
	// containers themselves), e.g. /run/staticpodd.
	RunDir string
	// RootDir is the daemon's persistent root, e.g. /var/lib/staticpodd.
	RootDir string
	// CgroupRoot is the cgroupfs parent of pod cgroups; default DefaultCgroupRoot.
	CgroupRoot string
	Images     ImageStore
	Logger     *slog.Logger
}

// generateFunc is spec.Generate; tests replace it.
type generateFunc func(pod *podspec.Pod, c *podspec.Container, img imagespec.ImageConfig, rootfs string, sb spec.Sandbox) (*specs.Spec, error)

// Runtime runs pods' containers. It is safe for concurrent use, and every method
// works for containers started by an earlier daemon process.
type Runtime struct {
	cfg      Config
	log      *slog.Logger
	generate generateFunc

	mu sync.Mutex
	// monitors holds the monitors this process started or adopted, by container
	// ID; guarded by mu.
	monitors map[string]*monitor
	// podLocks serialise sandbox creation and removal per pod UID; guarded by mu.
	podLocks map[string]*sync.Mutex
}
