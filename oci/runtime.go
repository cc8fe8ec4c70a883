// Package oci runs podspec pods as OCI containers through runc's libcontainer,
// in-process. Each container is watched by a small monitor process (this binary
// re-executed) so containers, their logs and their exit codes outlive the daemon.
package oci

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/sandbox"
	"github.com/staticpodd/staticpodd/oci/stats"
)

// DefaultCgroupRoot is the cgroupfs parent of every pod cgroup.
const DefaultCgroupRoot = "/staticpodd"

// DefaultStartTimeout bounds one container start, as the kubelet's default
// runtimeRequestTimeout bounds its CRI calls.
const DefaultStartTimeout = 2 * time.Minute

// ImageStore gives each container a writable root filesystem over an image;
// *image.Store is one.
type ImageStore interface {
	// Prepare mounts a writable overlay rootfs for key over image ref and returns
	// its path and the image. An image missing from the store is an error
	// wrapping podspec.ErrImageNotPresent.
	Prepare(key, ref string) (rootfs string, img image.Image, err error)
	// Release unmounts the rootfs of key and removes its writable layer. Releasing
	// an unknown key is not an error.
	Release(key string) error
	// Get returns image ref; a missing one is an error wrapping
	// podspec.ErrImageNotPresent.
	Get(ref string) (image.Image, error)
	// Snapshots lists the keys prepared and not released.
	Snapshots() ([]string, error)
}

// NetworkConfig is how pods without hostNetwork get their network, and
// OwnPort one of the daemon's own listeners, which no hostPort may take
// (see package sandbox).
type (
	NetworkConfig = sandbox.NetworkConfig
	OwnPort       = sandbox.OwnPort
)

// Config configures a Runtime.
type Config struct {
	// RunDir holds pod and container state (tmpfs, lost on reboot like the
	// containers themselves), e.g. /run/staticpodd.
	RunDir string
	// RootDir is the daemon's persistent root, e.g. /var/lib/staticpodd.
	RootDir string
	// CgroupRoot is the parent of pod cgroups; default DefaultCgroupRoot.
	// Under the systemd driver it names the slices (see podCgroupsPath).
	CgroupRoot string
	// CgroupDriver is CgroupDriverCgroupfs (the default: cgroup directories
	// the daemon makes) or CgroupDriverSystemd (pods as transient slices,
	// containers as scopes, made by systemd over D-Bus).
	CgroupDriver string
	// NodeCgroup, for tests only: the cgroupfs cgroup whose memory and pids
	// limits and usage stand for the node's in Stats, so that a test can make
	// node pressure real inside a small cgroup. "" = the node itself.
	NodeCgroup string
	// StartTimeout bounds Start: a container whose start hangs (a wedged
	// mount, a frozen cgroup) is killed and cleaned up when it expires;
	// default DefaultStartTimeout.
	StartTimeout time.Duration
	// LogMaxSize and LogMaxFiles rotate container logs as the kubelet's
	// containerLogMaxSize and containerLogMaxFiles do: a log file is renamed
	// to <log>.<time> before it would grow past LogMaxSize, older ones are
	// gzipped, and at most LogMaxFiles files (at least 2) are kept, the live
	// one included. The container's monitor does it, with the values of
	// when the container started. LogMaxSize 0 or less: no rotation.
	LogMaxSize  int64
	LogMaxFiles int
	// Network connects pods without hostNetwork to a pod network with CNI;
	// nil leaves them with their loopback only.
	Network *NetworkConfig
	Images  ImageStore
	Logger  *slog.Logger
}

// Runtime runs pods' containers. It is safe for concurrent use, and every method
// works for containers started by an earlier daemon process.
type Runtime struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// monitors holds the monitors this process started or adopted, by container
	// ID; guarded by mu.
	monitors map[string]*monitor
	// starting holds the containers a StartContainer is creating, removing those
	// being removed: status must not take either for a container whose
	// monitor was lost. Both guarded by mu.
	starting map[string]bool
	removing map[string]bool
	// spare is a monitor started after a container start for the next one;
	// refilling says one is being started; retired counts the times the
	// spare was given up (see retireSpare), so that a start under way then
	// is not kept. All guarded by mu.
	spare     *pendingMonitor
	refilling bool
	retired   uint64
	// retireTimer retires the spare once the node has had no sandbox for
	// spareIdle (spareIdleForTest, when set). Guarded by mu.
	retireTimer      *time.Timer
	spareIdleForTest time.Duration
	// aheads are the first containers' monitors and snapshots being
	// prepared while their sandboxes are made, by pod UID (see ahead).
	// Guarded by mu.
	aheads map[string]*ahead
	// podOf is the pod UID of each container whose record was read or
	// written, by container ID, which never changes: a sandbox's removal
	// looks for its pod's containers without reading every record
	// (anyContainerOf). Guarded by mu.
	podOf map[string]string

	// monitorPath is what monitors are started from; monitorFile, if not
	// nil, holds it open (see openMonitorExecutable).
	monitorPath string
	monitorFile *os.File
	// execs starts execs, from monitorPath; made at the first. Its server
	// exits after execServerIdle without an exec (execIdleForTest, when
	// set). Guarded by mu.
	execs           *execServer
	execIdleForTest time.Duration

	warmer attachWarmer
	// sb makes, removes and reaches into the pods' sandboxes, on net.
	sb  *sandbox.Manager
	net *sandbox.Network // nil: no pod network
	// checked is closed once the networks of the sandboxes found at start
	// were checked.
	checked chan struct{}
	// background counts the goroutines Start and refillSpare run;
	// stopBackground, if not nil, ends Start's; closed says Close
	// was called, after which neither starts one. All but background
	// guarded by mu.
	background     sync.WaitGroup
	stopBackground func()
	closed         bool
	// debugs ends each debug container running, by ID (guarded by mu);
	// debugging counts them, for Close to wait on.
	debugs    map[string]context.CancelCauseFunc
	debugging sync.WaitGroup
	// layers caches the size of each container's writable layer, which a
	// container with many files makes slow to walk (as cadvisor's du).
	layers stats.Layers
}
