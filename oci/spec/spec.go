// Package spec turns a podspec container into an OCI runtime spec, with
// functional options composed in one Generate.
package spec

import (
	"errors"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Sandbox is what a container joins: the pod's shared namespaces and files.
type Sandbox struct {
	NetNS string // path of the pod's network namespace file; "" with HostNetwork
	IPCNS string // path of the pod's IPC namespace file; "" with HostIPC
	UTSNS string // path of the pod's UTS namespace file; "" with HostNetwork

	CgroupsPath string // cgroupfs path of the container, e.g. /staticpodd/pod<uid>/<id>

	HostsFile      string // bind-mounted at /etc/hosts when not ""
	HostnameFile   string // bind-mounted at /etc/hostname when not ""
	ResolvConfFile string // bind-mounted at /etc/resolv.conf when not ""
}

// Generate returns the OCI runtime spec for container c of pod, over an image with
// config img unpacked at rootfs.
func Generate(pod *podspec.Pod, c *podspec.Container, img imagespec.ImageConfig, rootfs string, sb Sandbox) (*specs.Spec, error) {
	return nil, errors.New("spec.Generate: not implemented yet")
}
