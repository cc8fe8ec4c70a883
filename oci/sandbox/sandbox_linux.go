//go:build linux && cgo

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/opencontainers/cgroups"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
	"github.com/staticpodd/staticpodd/oci/spec"
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

// Config configures a Manager.
type Config struct {
	// RunDir holds the sandboxes, under Dir.
	RunDir string
	// CgroupsPath is where pod uid's cgroup goes, as the cgroup driver
	// names it.
	CgroupsPath func(uid string) string
	// Network connects pods without hostNetwork to the pod network; nil
	// leaves them with their loopback only.
	Network *Network
	// Warm, if not nil, is called once a pod's cgroup was made: its first
	// container follows soon.
	Warm func()
	// Logger is where the sandboxes' warnings go; nil: nowhere.
	Logger *slog.Logger
}

// Manager makes and removes the sandboxes under Config.RunDir. It is safe
// for concurrent use, and works for the sandboxes of an earlier daemon.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	net  *Network // nil: no pod network
	nets netCache

	mu sync.Mutex
	// locks serialise sandbox creation and removal per pod UID, present
	// while someone holds or waits for one; guarded by mu.
	locks map[string]*podLock
	// statuses caches the status of each sandbox this process made or
	// checked, by pod UID; guarded by mu.
	statuses map[string]podspec.SandboxStatus
}

// New returns a Manager of the sandboxes under cfg.RunDir.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		cfg:      cfg,
		log:      cfg.Logger,
		net:      cfg.Network,
		locks:    map[string]*podLock{},
		statuses: map[string]podspec.SandboxStatus{},
	}
}

// The JSON files of a sandbox are written and read as the container
// monitor writes and reads its own.
var (
	writeJSON            = mon.WriteJSON
	readJSON             = mon.ReadJSON
	readOptionalJSON     = mon.ReadOptionalJSON
	isSystemdCgroupsPath = mon.IsSystemdCgroupsPath
)

func (m *Manager) dir(uid string) string {
	return filepath.Join(m.cfg.RunDir, Dir, uid)
}

// Record reads pod uid's Record; an error wrapping fs.ErrNotExist when it
// has no complete sandbox.
func (m *Manager) Record(uid string) (Record, error) {
	var pr Record
	err := readJSON(filepath.Join(m.dir(uid), recordFile), &pr)
	return pr, err
}

// podLock serialises sandbox changes of one pod UID.
type podLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by Manager.mu
}

// lockPod locks pod uid's sandbox and returns the unlock. Manager.locks
// has an entry only while someone holds or waits for it.
func (m *Manager) lockPod(uid string) (unlock func()) {
	m.mu.Lock()
	l, ok := m.locks[uid]
	if !ok {
		l = &podLock{}
		m.locks[uid] = l
	}
	l.refs++
	m.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		m.mu.Lock()
		defer m.mu.Unlock()
		if l.refs--; l.refs == 0 {
			delete(m.locks, uid)
		}
	}
}

func validName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// Exists reports whether pod uid's sandbox is complete (its record written):
// Create would do nothing.
func (m *Manager) Exists(uid string) bool {
	if !validName(uid) {
		return false
	}
	_, err := os.Stat(filepath.Join(m.dir(uid), recordFile))
	return err == nil
}

// Create makes the namespaces, files and cgroup pod's containers share.
// It is a no-op for an existing sandbox.
func (m *Manager) Create(ctx context.Context, pod *podspec.Pod) error {
	if !validName(pod.UID) {
		return fmt.Errorf("create sandbox of pod %s: invalid UID %q", pod.Name, pod.UID)
	}
	defer m.lockPod(pod.UID)()
	dir := m.dir(pod.UID)
	if _, err := os.Stat(filepath.Join(dir, recordFile)); err == nil {
		return nil
	}
	// A daemon that died half-way through left parts: start from nothing.
	// Nothing of a sandbox is made before its directory, nor left without
	// it (remove takes it last, once the rest is gone): a pod's first start
	// does not pay for removing what was never made (libcontainer's cgroup
	// manager, with the systemd driver a call to systemd). Only a cgroup
	// an older daemon's failed removal left without its directory is
	// looked for, by its directories alone.
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		if err := m.remove(ctx, pod.UID); err != nil {
			return fmt.Errorf("create sandbox of pod %s: remove partial sandbox: %w", pod.Name, err)
		}
	} else if err := removeCgroupIfAny(m.cfg.CgroupsPath(pod.UID)); err != nil {
		return fmt.Errorf("create sandbox of pod %s: %w", pod.Name, err)
	}
	pr := Record{
		UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name, Hostname: pod.Hostname,
		HostNetwork: pod.HostNetwork, HostIPC: pod.HostIPC,
		CgroupsPath: m.cfg.CgroupsPath(pod.UID),
		PidsLimit:   max(pod.PidsLimit, 0),
		MemoryLimit: max(pod.Resources.MemoryLimit, 0),
		CPUShares:   pod.Resources.CPUShares,
		CPUQuota:    max(pod.Resources.CPUQuota, 0),
		CPUPeriod:   pod.Resources.CPUPeriod,
	}
	if err := m.createSandbox(ctx, dir, pr, pod); err != nil {
		err = fmt.Errorf("create sandbox of pod %s: %w", pod.Name, err)
		if rerr := m.remove(context.WithoutCancel(ctx), pod.UID); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

func (m *Manager) createSandbox(ctx context.Context, dir string, pr Record, pod *podspec.Pod) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	// Without a network attachment, the pod's cgroup is made beside its
	// namespaces, files and /dev/shm: neither needs the other, and each
	// takes a few hundred microseconds of a pod's start (libcontainer's
	// cgroup manager writes every v1 hierarchy, cpuset's ancestors
	// included). It is joined before createSandbox returns, whatever
	// failed: Create then removes the sandbox whole, cgroup included. With
	// one, it is made after the attachment, as before: a daemon killed
	// during a CNI ADD (up to cniTimeout) leaves no cgroup that a restart
	// with another cgroupDriver or cgroupRoot would not find.
	if !pr.HostNetwork && m.net != nil {
		if err := m.createParts(ctx, dir, &pr, pod); err != nil {
			return err
		}
		if err := m.createCgroup(dir, pr); err != nil {
			return err
		}
	} else {
		cgroupMade := make(chan error, 1)
		cg := pr // createParts is handed pr to write
		go func() { cgroupMade <- m.createCgroup(dir, cg) }()
		err := m.createParts(ctx, dir, &pr, pod)
		if err := errors.Join(err, <-cgroupMade); err != nil {
			return err
		}
	}
	// The pod's first container follows soon. Not earlier: creating a cgroup
	// waits while the attach holds the cgroup mutex.
	if m.cfg.Warm != nil {
		m.cfg.Warm()
	}
	// The record last: its presence means the sandbox is complete.
	if err := writeJSON(filepath.Join(dir, recordFile), pr); err != nil {
		return err
	}
	m.mu.Lock()
	m.statuses[pr.UID] = sandboxStatus(pr)
	m.mu.Unlock()
	return nil
}

// createCgroup makes the pod's cgroup, with its limits, once its path is
// in the sandbox's directory dir (cgroupFile). Not fsynced: a cgroup does
// not outlive the machine, and a killed daemon's writes are in the page
// cache.
func (m *Manager) createCgroup(dir string, pr Record) error {
	if err := os.WriteFile(filepath.Join(dir, cgroupFile), []byte(pr.CgroupsPath), 0o600); err != nil {
		return err
	}
	res := podCgroupResources(pr)
	mgr, err := newCgroupManager(cgroupConfig(pr.CgroupsPath, res))
	if err != nil {
		return fmt.Errorf("pod cgroup %s: %w", pr.CgroupsPath, err)
	}
	if err := mgr.Apply(-1); err != nil {
		return fmt.Errorf("create pod cgroup %s: %w", pr.CgroupsPath, err)
	}
	if err := mgr.Set(res); err != nil {
		return fmt.Errorf("set limits of pod cgroup %s: %w", pr.CgroupsPath, err)
	}
	return nil
}

// createParts makes the sandbox's namespaces, its network attachment
// (recorded in pr), its files and its /dev/shm.
func (m *Manager) createParts(ctx context.Context, dir string, pr *Record, pod *podspec.Pod) error {
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
	if !pr.HostNetwork && m.net != nil {
		st, err := m.net.attach(ctx, dir, pod)
		if err != nil {
			return err
		}
		pr.Network, pr.NetworkSource, pr.NetworkPlugins, pr.NetworkMessage = st.Network, st.Source, st.Plugins, st.Message
		for _, ip := range st.IPs {
			pr.IPs = append(pr.IPs, ip.String())
		}
	}
	if err := writeSandboxFiles(dir, *pr, pod.DNS); err != nil {
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
	return nil
}

// podCgroupResources are the limits of the pod's own cgroup: pids.max, and
// the CPU shares (cpu.weight on v2), CPU quota (cpu.max) and memory limit
// (memory.max) the agent chose per QoS class.
func podCgroupResources(pr Record) *cgroups.Resources {
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
func writeSandboxFiles(dir string, pr Record, dns *podspec.DNSConfig) error {
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

// Remove unmounts and removes what Create made, tolerating any part of it
// missing. The pod's containers must be destroyed first: empty, called
// with the sandbox locked, says why they are not.
func (m *Manager) Remove(ctx context.Context, podUID string, empty func() error) error {
	if !validName(podUID) {
		return fmt.Errorf("remove sandbox %q: invalid UID", podUID)
	}
	defer m.lockPod(podUID)()
	if err := empty(); err != nil {
		return fmt.Errorf("remove sandbox of pod %s: %w", podUID, err)
	}
	if err := m.remove(ctx, podUID); err != nil {
		return fmt.Errorf("remove sandbox of pod %s: %w", podUID, err)
	}
	return nil
}

func (m *Manager) remove(ctx context.Context, uid string) error {
	// Forgotten before the namespace is unmounted, and again once the sandbox
	// is gone: a probe's Dial in between may have opened it again, and would
	// otherwise keep the namespace (and so the network) alive for ever.
	m.nets.forget(uid)
	defer m.nets.forget(uid)
	// Likewise the status: a Status call during CNI's DEL reads pod.json
	// again, and its entry would outlive the sandbox.
	m.forgetStatus(uid)
	defer m.forgetStatus(uid)
	dir := m.dir(uid)
	// DEL first, while the namespace is there for the plugins to clean up
	// in. A DEL that fails keeps the sandbox (and its record of the
	// attachment) for the next try: what is left of it would otherwise leak.
	if m.net != nil {
		if err := m.net.detach(ctx, dir); err != nil {
			return err
		}
	}
	// The cgroup the sandbox was made with, which a daemon started with
	// another cgroupDriver or cgroupRoot would not name again: cgroupFile,
	// else (a sandbox of an older daemon) the record's, kept in cgroupFile
	// before the record goes.
	cg, kept := m.recordedCgroup(dir, uid)
	if cg == "" {
		cg, kept = m.cfg.CgroupsPath(uid), true
	}
	// The record first: a removal cut short or failed from here on leaves
	// a partial sandbox, listed by nothing, which the next try, Create or
	// the next daemon's RemovePartial removes; not one that looks whole
	// with its namespaces gone. Unless the cgroup's path is in the record
	// alone (cgroupFile could not be written: a full run dir, which only
	// this removal may free): then it goes with the directory, as it did
	// before cgroupFile.
	if kept {
		if err := os.Remove(filepath.Join(dir, recordFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
	if err := RemoveCgroup(cg); err != nil {
		errs = append(errs, err)
	}
	// The directory goes last, and only once the rest is gone: Create
	// removes nothing where there is none.
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return os.RemoveAll(dir)
}

// recordedCgroup is the path of the cgroup of pod uid's sandbox in dir, ""
// when none is recorded; kept says it is in cgroupFile. A path found only
// in the record (a sandbox made before cgroupFile) is written to
// cgroupFile, which outlives the record, when it can be. A recorded path
// that no cgroupDriver or cgroupRoot gives the pod is not taken: removing
// a cgroup kills every process in it.
func (m *Manager) recordedCgroup(dir, uid string) (cg string, kept bool) {
	b, err := os.ReadFile(filepath.Join(dir, cgroupFile))
	if err == nil && len(b) > 0 { // empty: written before a power cut, on a run dir on a disk
		if p := string(b); podCgroupPath(uid, p) {
			return p, true
		}
		m.log.Warn("the sandbox's cgroup file names no cgroup of its pod; not taken", "pod", uid, "cgroup", shortString(b))
	}
	var pr Record
	if ok, err := readOptionalJSON(filepath.Join(dir, recordFile), &pr); err != nil || !ok || pr.CgroupsPath == "" {
		return "", false
	}
	if !podCgroupPath(uid, pr.CgroupsPath) {
		m.log.Warn("the sandbox's record names no cgroup of its pod; not taken", "pod", uid, "cgroup", shortString([]byte(pr.CgroupsPath)))
		return "", false
	}
	if err := os.WriteFile(filepath.Join(dir, cgroupFile), []byte(pr.CgroupsPath), 0o600); err != nil {
		return pr.CgroupsPath, false
	}
	return pr.CgroupsPath, true
}

// podCgroupPath says whether p is a path a cgroupDriver and a cgroupRoot
// give pod uid's cgroup (oci.podCgroupsPath): a cgroupfs path, clean, that
// ends in pod<uid>, or a systemd slice ending in -pod<uid>.slice (the
// kubelet's escaping: "-" as "_").
func podCgroupPath(uid, p string) bool {
	if isSystemdCgroupsPath(p) {
		return !strings.ContainsAny(p, "/:") && strings.HasSuffix(p, "-pod"+strings.ReplaceAll(uid, "-", "_")+".slice")
	}
	return p != "" && path.Clean(p) == p && path.Base(p) == "pod"+uid && !slices.Contains(strings.Split(p, "/"), "..")
}

// shortString is b for a log line: at most 128 bytes, quoted.
func shortString(b []byte) string {
	if len(b) > 128 {
		return strconv.Quote(string(b[:128])) + "..."
	}
	return strconv.Quote(string(b))
}

// Join names what a container joins in the sandbox of pr, the record of
// its pod: namespaces, /dev/shm and the files of /etc; its cgroup is
// cgroupsPath, inside the pod's.
func (m *Manager) Join(pr Record, cgroupsPath string) spec.Sandbox {
	dir := m.dir(pr.UID)
	sb := spec.Sandbox{
		CgroupsPath:    cgroupsPath,
		HostsFile:      filepath.Join(dir, "hosts"),
		HostnameFile:   filepath.Join(dir, "hostname"),
		ResolvConfFile: filepath.Join(dir, "resolv.conf"),
	}
	if !pr.HostNetwork {
		sb.NetNS = filepath.Join(dir, nsNet)
		sb.UTSNS = filepath.Join(dir, nsUTS)
	}
	sb.ShmPath = "/dev/shm"
	if !pr.HostIPC {
		sb.IPCNS = filepath.Join(dir, nsIPC)
		sb.ShmPath = filepath.Join(dir, shmDir)
		if _, err := os.Stat(sb.ShmPath); err != nil {
			sb.ShmPath = "" // a sandbox of an older daemon: a tmpfs of its own
		}
	}
	return sb
}

// RemovePartial removes the sandboxes without a record, which is written
// last and whose presence means complete: a creation cut short by the
// daemon's death, or a removal. List does not list them, so no worker would
// ever remove their namespace mounts, /dev/shm and cgroup (found by the
// chaos soak: a sandbox left after every pod was removed). No container is
// made in a sandbox before its record is written. It takes no pod's lock:
// it runs as the daemon starts, before any sandbox is made or removed.
// When ctx ends it stops and returns ctx's cause.
func (m *Manager) RemovePartial(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(m.cfg.RunDir, Dir))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("list sandboxes for partial ones", "err", err)
		}
		return nil
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		uid := e.Name()
		if _, err := os.Stat(filepath.Join(m.dir(uid), recordFile)); !validName(uid) || !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		m.log.Info("remove the sandbox an interrupted creation or removal left", "pod", uid)
		if err := m.remove(ctx, uid); err != nil {
			m.log.Warn("remove partial sandbox", "pod", uid, "err", err)
		}
	}
	return nil
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

// parentSlice is the slice a systemd slice name sits in: a-b-c.slice is in
// a-b.slice; a.slice in -.slice.
func parentSlice(slice string) string {
	name := strings.TrimSuffix(slice, ".slice")
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "-.slice"
	}
	return name[:i] + ".slice"
}

// RemoveCgroup removes the cgroup at cgPath, a pod's or one of its
// containers' (in every hierarchy; a systemd slice or scope is stopped),
// killing what is left in it (a start that was given up on can leave a
// process); a missing one is not an error.
func RemoveCgroup(cgPath string) error {
	mgr, err := newCgroupManager(cgroupConfig(cgPath, &cgroups.Resources{SkipDevices: true}))
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

// removeCgroupIfAny removes the cgroup at cgPath if any of its directories
// is there: looking costs a stat a hierarchy, where RemoveCgroup reads and
// removes in each (and with the systemd driver asks systemd to stop it).
func removeCgroupIfAny(cgPath string) error {
	mgr, err := newCgroupManager(cgroupConfig(cgPath, &cgroups.Resources{SkipDevices: true}))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", cgPath, err)
	}
	for _, p := range mgr.GetPaths() {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return RemoveCgroup(cgPath)
		}
	}
	return nil
}

// Status tells pod uid's addresses on the pod network, or why it has none,
// from its record; a sandbox adopted from an earlier daemon whose network
// failed CNI's CHECK (see CheckNetworks) says so in Message. Chosen tells
// when a pod made now would get another network: the configuration
// directory is read again at each call.
func (m *Manager) Status(ctx context.Context, uid string) (podspec.SandboxStatus, error) {
	st, err := m.status(uid)
	if err != nil || m.net == nil || (st.Network == "" && st.Message == "") {
		return st, err // hostNetwork: no network of its own
	}
	if now := m.net.chosen(); !sameNetwork(st, now) {
		st.Chosen = &now
	}
	return st, nil
}

// status is pod uid's network status as recorded, kept in memory.
func (m *Manager) status(uid string) (podspec.SandboxStatus, error) {
	m.mu.Lock()
	st, ok := m.statuses[uid]
	m.mu.Unlock()
	if ok {
		return st, nil
	}
	if !validName(uid) {
		return podspec.SandboxStatus{}, fmt.Errorf("sandbox %q: invalid UID", uid)
	}
	var pr Record
	if err := readJSON(filepath.Join(m.dir(uid), recordFile), &pr); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = podspec.ErrNotExist
		}
		return podspec.SandboxStatus{}, fmt.Errorf("sandbox of pod %s: %w", uid, err)
	}
	st = sandboxStatus(pr)
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.statuses[uid]; ok {
		return cur, nil // the check got there first
	}
	m.statuses[uid] = st
	return st, nil
}

// checkNetworks runs CNI's CHECK once on the network of every sandbox an
// earlier daemon made, off the start-up path (a plugin is a process each:
// tens of milliseconds a pod), and keeps what fails in the sandbox's status.
// The pods keep running either way.
func (m *Manager) CheckNetworks(ctx context.Context, uids []string) {
	for _, uid := range uids {
		func() {
			defer m.lockPod(uid)()
			dir := m.dir(uid)
			var pr Record
			if err := readJSON(filepath.Join(dir, recordFile), &pr); err != nil || pr.HostNetwork {
				return // removed meanwhile, or no network of its own
			}
			err := m.net.check(ctx, dir)
			if err == nil {
				return
			}
			m.log.Warn("adopted pod's network does not check out", "pod", pr.Name, "uid", uid, "err", err)
			st := sandboxStatus(pr)
			st.Message = err.Error()
			m.mu.Lock()
			m.statuses[uid] = st
			m.mu.Unlock()
		}()
	}
}

func sandboxStatus(pr Record) podspec.SandboxStatus {
	st := podspec.SandboxStatus{Network: pr.Network, Source: pr.NetworkSource, Plugins: pr.NetworkPlugins, Message: pr.NetworkMessage}
	for _, s := range pr.IPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			st.IPs = append(st.IPs, ip)
		}
	}
	return st
}

func (m *Manager) forgetStatus(uid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.statuses, uid)
}
