//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Names of the namespace bind mounts in a pod's directory.
const (
	nsNet = "net"
	nsIPC = "ipc"
	nsUTS = "uts"
)

// shmDir is the pod's /dev/shm tmpfs in its directory, and shmOptions its
// mount options: containerd's, 64 MiB.
const (
	shmDir     = "shm"
	shmOptions = "mode=1777,size=65536k"
)

// podLock serialises sandbox changes of one pod UID.
type podLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by Runtime.mu
}

// lockPod locks pod uid's sandbox and returns the unlock. Runtime.podLocks
// has an entry only while someone holds or waits for it.
func (r *Runtime) lockPod(uid string) (unlock func()) {
	r.mu.Lock()
	l, ok := r.podLocks[uid]
	if !ok {
		l = &podLock{}
		r.podLocks[uid] = l
	}
	l.refs++
	r.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		r.mu.Lock()
		defer r.mu.Unlock()
		if l.refs--; l.refs == 0 {
			delete(r.podLocks, uid)
		}
	}
}

func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// CreateSandbox makes the namespaces, files and cgroup pod's containers share.
// It is a no-op for an existing sandbox.
func (r *Runtime) CreateSandbox(ctx context.Context, pod *podspec.Pod) error {
	if !validName(pod.UID) {
		return fmt.Errorf("create sandbox of pod %s: invalid UID %q", pod.Name, pod.UID)
	}
	defer r.lockPod(pod.UID)()
	dir := r.podDir(pod.UID)
	if _, err := os.Stat(filepath.Join(dir, podFile)); err == nil {
		return nil
	}
	// A daemon that died half-way through left parts: start from nothing.
	if err := r.removeSandbox(ctx, pod.UID); err != nil {
		return fmt.Errorf("create sandbox of pod %s: remove partial sandbox: %w", pod.Name, err)
	}
	pr := podRecord{
		UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name, Hostname: pod.Hostname,
		HostNetwork: pod.HostNetwork, HostIPC: pod.HostIPC,
		CgroupsPath: podCgroupsPath(r.cfg.CgroupDriver, r.cfg.CgroupRoot, pod.UID),
		PidsLimit:   max(pod.PidsLimit, 0),
		MemoryLimit: max(pod.Resources.MemoryLimit, 0),
		CPUShares:   pod.Resources.CPUShares,
		CPUQuota:    max(pod.Resources.CPUQuota, 0),
		CPUPeriod:   pod.Resources.CPUPeriod,
	}
	if err := r.createSandbox(ctx, dir, pr, pod); err != nil {
		err = fmt.Errorf("create sandbox of pod %s: %w", pod.Name, err)
		if rerr := r.removeSandbox(context.WithoutCancel(ctx), pod.UID); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

func (r *Runtime) createSandbox(ctx context.Context, dir string, pr podRecord, pod *podspec.Pod) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	var flags int
	if !pr.HostNetwork {
		flags |= unix.CLONE_NEWNET | unix.CLONE_NEWUTS
	}
	if !pr.HostIPC {
		flags |= unix.CLONE_NEWIPC
	}
	if flags != 0 {
		if err := makeNamespaces(dir, flags, pr.Hostname); err != nil {
			return err
		}
	}
	if !pr.HostNetwork && r.net != nil {
		st, err := r.net.attach(ctx, dir, pod)
		if err != nil {
			return err
		}
		pr.Network, pr.NetworkMessage = st.Network, st.Message
		for _, ip := range st.IPs {
			pr.IPs = append(pr.IPs, ip.String())
		}
	}
	if err := writeSandboxFiles(dir, pr, pod.DNS); err != nil {
		return err
	}
	if !pr.HostIPC {
		// One /dev/shm for all the pod's containers, as they share IPC.
		shm := filepath.Join(dir, shmDir)
		if err := os.Mkdir(shm, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, shmOptions); err != nil {
			return fmt.Errorf("mount /dev/shm tmpfs at %s: %w", shm, err)
		}
	}
	res := podCgroupResources(pr)
	mgr, err := manager.New(cgroupConfig(pr.CgroupsPath, res))
	if err != nil {
		return fmt.Errorf("pod cgroup %s: %w", pr.CgroupsPath, err)
	}
	if err := mgr.Apply(-1); err != nil {
		return fmt.Errorf("create pod cgroup %s: %w", pr.CgroupsPath, err)
	}
	if err := mgr.Set(res); err != nil {
		return fmt.Errorf("set limits of pod cgroup %s: %w", pr.CgroupsPath, err)
	}
	// The pod's first container follows soon. Not earlier: creating a cgroup
	// waits while the attach holds the cgroup mutex.
	r.warmer.warm()
	// The record last: its presence means the sandbox is complete.
	if err := writeJSON(filepath.Join(dir, podFile), pr); err != nil {
		return err
	}
	r.mu.Lock()
	r.sandboxes[pr.UID] = sandboxStatus(pr)
	r.mu.Unlock()
	return nil
}

// podCgroupResources are the limits of the pod's own cgroup: pids.max, and
// the CPU shares (cpu.weight on v2), CPU quota (cpu.max) and memory limit
// (memory.max) the agent chose per QoS class.
func podCgroupResources(pr podRecord) *cgroups.Resources {
	res := &cgroups.Resources{SkipDevices: true}
	if pr.PidsLimit > 0 {
		res.PidsLimit = &pr.PidsLimit
	}
	if pr.MemoryLimit > 0 {
		res.Memory = pr.MemoryLimit
	}
	res.CpuShares = pr.CPUShares
	if pr.CPUShares > 0 && cgroups.IsCgroup2UnifiedMode() {
		// libcontainer converts a container's shares when it converts its
		// spec; the pod's are given here, mapped the same way.
		res.CpuWeight = cgroups.ConvertCPUSharesToCgroupV2Value(pr.CPUShares)
	}
	if pr.CPUQuota > 0 {
		res.CpuQuota = pr.CPUQuota
		res.CpuPeriod = pr.CPUPeriod
		if res.CpuPeriod == 0 {
			res.CpuPeriod = 100000
		}
	}
	return res
}

// writeSandboxFiles writes the pod's /etc/hosts, /etc/hostname and
// /etc/resolv.conf (from dns; without it, the host's copy).
func writeSandboxFiles(dir string, pr podRecord, dns *podspec.DNSConfig) error {
	hostname := pr.Hostname
	var hosts []byte
	if pr.HostNetwork {
		var err error
		if hostname, err = os.Hostname(); err != nil {
			return fmt.Errorf("hostname: %w", err)
		}
		if hosts, err = os.ReadFile("/etc/hosts"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	} else {
		hosts = podHosts(hostname, pr.IPs)
	}
	var resolv []byte
	if dns != nil {
		resolv = resolvConf(dns)
	} else {
		var err error
		if resolv, err = os.ReadFile("/etc/resolv.conf"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for name, data := range map[string][]byte{
		"hosts":       hosts,
		"hostname":    []byte(hostname + "\n"),
		"resolv.conf": resolv,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// makeNamespaces creates the namespaces in flags on a dedicated OS thread,
// sets them up (lo up, hostname) and bind-mounts them into dir, as
// `ip netns add` does. The thread is never returned to the Go scheduler:
// the goroutine exits locked, which ends the thread, or parks it for good
// when it is the main thread (so the daemon's own namespaces are never read
// from /proc/self: see openOwn).
func makeNamespaces(dir string, flags int, hostname string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		errc <- setupNamespaces(dir, flags, hostname)
	}()
	return <-errc
}

func setupNamespaces(dir string, flags int, hostname string) error {
	if err := unix.Unshare(flags); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if flags&unix.CLONE_NEWUTS != 0 && hostname != "" {
		if err := unix.Sethostname([]byte(hostname)); err != nil {
			return fmt.Errorf("sethostname %q: %w", hostname, err)
		}
	}
	if flags&unix.CLONE_NEWNET != 0 {
		if err := loUp(); err != nil {
			return err
		}
	}
	task := "/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/"
	for flag, name := range map[int]string{unix.CLONE_NEWNET: nsNet, unix.CLONE_NEWIPC: nsIPC, unix.CLONE_NEWUTS: nsUTS} {
		if flags&flag == 0 {
			continue
		}
		target := filepath.Join(dir, name)
		f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o444)
		if err != nil {
			return err
		}
		_ = f.Close()
		if err := unix.Mount(task+name, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount %s namespace to %s: %w", name, target, err)
		}
	}
	return nil
}

func loUp() error {
	h, err := netlink.NewHandle() // a socket in this thread's new netns
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

// RemoveSandbox unmounts and removes what CreateSandbox made, tolerating any
// part of it missing. The pod's containers must be destroyed first.
func (r *Runtime) RemoveSandbox(ctx context.Context, podUID string) error {
	if !validName(podUID) {
		return fmt.Errorf("remove sandbox %q: invalid UID", podUID)
	}
	defer r.lockPod(podUID)()
	// The pod's own records only: the status of another pod's container is
	// none of its business.
	if c, err := r.anyContainerOf(podUID); err != nil {
		return fmt.Errorf("remove sandbox of pod %s: %w", podUID, err)
	} else if c != nil {
		return fmt.Errorf("remove sandbox of pod %s: container %s (%s) not destroyed", podUID, c.Name, c.ID)
	}
	if err := r.removeSandbox(ctx, podUID); err != nil {
		return fmt.Errorf("remove sandbox of pod %s: %w", podUID, err)
	}
	return nil
}

// anyContainerOf returns the record of a container of pod uid, or nil if it
// has none.
func (r *Runtime) anyContainerOf(uid string) (*containerRecord, error) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, containersDir))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), removingSuffix) {
			continue // removed
		}
		var rec containerRecord
		err := readJSON(filepath.Join(r.containerDir(e.Name()), containerFile), &rec)
		if errors.Is(err, fs.ErrNotExist) {
			continue // being created or removed
		}
		if err != nil {
			return nil, err
		}
		if rec.PodUID == uid {
			return &rec, nil
		}
	}
	return nil, nil
}

func (r *Runtime) removeSandbox(ctx context.Context, uid string) error {
	// Forgotten before the namespace is unmounted, and again once the sandbox
	// is gone: a probe's Dial in between may have opened it again, and would
	// otherwise keep the namespace (and so the network) alive for ever.
	r.nets.forget(uid)
	defer r.nets.forget(uid)
	r.forgetSandboxStatus(uid)
	dir := r.podDir(uid)
	// DEL first, while the namespace is there for the plugins to clean up
	// in. A DEL that fails keeps the sandbox (and its record of the
	// attachment) for the next try: what is left of it would otherwise leak.
	if r.net != nil {
		if err := r.net.detach(ctx, dir); err != nil {
			return err
		}
	}
	var errs []error
	for _, name := range []string{nsNet, nsIPC, nsUTS, shmDir} {
		err := unix.Unmount(filepath.Join(dir, name), unix.MNT_DETACH)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", name, err))
		}
	}
	// The cgroup the sandbox was made with, which a daemon started with
	// another cgroupDriver or cgroupRoot would not name again.
	cg := podCgroupsPath(r.cfg.CgroupDriver, r.cfg.CgroupRoot, uid)
	var pr podRecord
	if ok, err := readOptionalJSON(filepath.Join(dir, podFile), &pr); err == nil && ok && pr.CgroupsPath != "" {
		cg = pr.CgroupsPath
	}
	errs = append(errs, removeCgroup(cg))
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cgroupConfig is libcontainer's description of the cgroup at cgPath: a
// cgroupfs path, a pod's systemd slice, or a container's systemd scope
// (slice:prefix:name).
func cgroupConfig(cgPath string, res *cgroups.Resources) *cgroups.Cgroup {
	if !isSystemdCgroupsPath(cgPath) {
		return &cgroups.Cgroup{Path: cgPath, Resources: res}
	}
	slice, rest, scope := strings.Cut(cgPath, ":")
	if !scope {
		return &cgroups.Cgroup{Name: slice, Parent: parentSlice(slice), Systemd: true, Resources: res}
	}
	prefix, name, _ := strings.Cut(rest, ":")
	return &cgroups.Cgroup{Parent: slice, ScopePrefix: prefix, Name: name, Systemd: true, Resources: res}
}

// removeCgroup removes the cgroup at cgPath (in every hierarchy; a systemd
// slice or scope is stopped), killing what is left in it (a start that was
// given up on can leave a process); a missing one is not an error.
func removeCgroup(cgPath string) error {
	mgr, err := manager.New(cgroupConfig(cgPath, &cgroups.Resources{SkipDevices: true}))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", cgPath, err)
	}
	if pids, err := mgr.GetAllPids(); err == nil && len(pids) > 0 {
		// A frozen process does not die before it is thawed.
		_ = mgr.Freeze(cgroups.Thawed)
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	if err := mgr.Destroy(); err != nil {
		return fmt.Errorf("remove cgroup %s: %w", cgPath, err)
	}
	return nil
}

// ListSandboxes returns the UIDs of the pods that have a sandbox.
func (r *Runtime) ListSandboxes(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, podsDir))
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var uids []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(r.cfg.RunDir, podsDir, e.Name(), podFile)); err == nil {
			uids = append(uids, e.Name())
		}
	}
	return uids, nil
}

// SandboxStatus tells pod uid's addresses on the pod network, or why it has
// none, from its record; a sandbox adopted from an earlier daemon whose
// network failed CNI's CHECK (run once in the background, see
// checkNetworks) says so in Message.
func (r *Runtime) SandboxStatus(ctx context.Context, uid string) (podspec.SandboxStatus, error) {
	r.mu.Lock()
	st, ok := r.sandboxes[uid]
	r.mu.Unlock()
	if ok {
		return st, nil
	}
	if !validName(uid) {
		return podspec.SandboxStatus{}, fmt.Errorf("sandbox %q: invalid UID", uid)
	}
	var pr podRecord
	if err := readJSON(filepath.Join(r.podDir(uid), podFile), &pr); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = podspec.ErrNotExist
		}
		return podspec.SandboxStatus{}, fmt.Errorf("sandbox of pod %s: %w", uid, err)
	}
	st = sandboxStatus(pr)
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.sandboxes[uid]; ok {
		return cur, nil // the check got there first
	}
	r.sandboxes[uid] = st
	return st, nil
}

// checkNetworks runs CNI's CHECK once on the network of every sandbox an
// earlier daemon made, off the start-up path (a plugin is a process each:
// tens of milliseconds a pod), and keeps what fails in the sandbox's status.
// The pods keep running either way. It closes r.checked when done.
func (r *Runtime) checkNetworks(ctx context.Context, uids []string) {
	defer close(r.checked)
	for _, uid := range uids {
		func() {
			defer r.lockPod(uid)()
			dir := r.podDir(uid)
			var pr podRecord
			if err := readJSON(filepath.Join(dir, podFile), &pr); err != nil || pr.HostNetwork {
				return // removed meanwhile, or no network of its own
			}
			err := r.net.check(ctx, dir)
			if err == nil {
				return
			}
			r.log.Warn("adopted pod's network does not check out", "pod", pr.Name, "uid", uid, "err", err)
			st := sandboxStatus(pr)
			st.Message = err.Error()
			r.mu.Lock()
			r.sandboxes[uid] = st
			r.mu.Unlock()
		}()
	}
}

func sandboxStatus(pr podRecord) podspec.SandboxStatus {
	st := podspec.SandboxStatus{Network: pr.Network, Message: pr.NetworkMessage}
	for _, s := range pr.IPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			st.IPs = append(st.IPs, ip)
		}
	}
	return st
}

func (r *Runtime) forgetSandboxStatus(uid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sandboxes, uid)
}
