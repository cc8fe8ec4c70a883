//go:build linux

// Package kubeadm drives staticpodd with the real kubeadm (make test-kubeadm):
// init, the node and its mirror pods, upgrade and reset, each on a "machine"
// of the test's own. This file is the machine; kubeadm_test.go the steps.
package kubeadm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// MachinePaths are the host paths kubeadm, the node agent and etcd hard-code:
// each machine has its own directory bind-mounted over each, in a mount
// namespace of its own, so that nothing of the host's is read or written.
// (Only the mount points themselves are made on the host when missing: empty
// directories.)
var MachinePaths = []string{
	"/etc/kubernetes",
	"/var/lib/kubelet",
	"/var/lib/etcd",
	"/run/staticpodd",
	"/var/lib/staticpodd",
	"/var/log/pods",
	// containerd's, for the machines that run the kubelet on it.
	"/var/lib/containerd",
	"/run/containerd",
	// root's home: the guide's files (kubeadm.yaml, the images' archive)
	// and kubectl's cache.
	"/root",
	// The staticpodd package's configuration, for the machines that run it
	// as staticpodd.service (the mirror pods guide's appliance).
	"/etc/staticpodd",
	"/etc/default",
}

// Machine is a node of the test: a network namespace (cluster.Netns) and a
// private mount namespace with its own MachinePaths and /etc/hosts, kept
// alive by a bind mount of its nsfs file so that every command of the test
// enters both (nsenter --mount --net). On its PATH: the systemctl stand-in
// (tests/kubeadm/systemctl), staticpodd, kubeadm and kubectl.
type Machine struct {
	t    *testing.T
	Name string // node name, resolvable on the machine (its /etc/hosts)
	Addr string
	Dir  string // on the host: the sources of the bind mounts, the stand-in's files
	Ns   *cluster.Netns
	// Cgroup is the node agent's cgroupRoot, under which no cgroup may be left.
	Cgroup string

	crictlConfig string
	nsDir        string // a private mount on the host holding mnt
	mnt          string // the mount namespace's nsfs file
	bin          string
}

// NewMachine makes the machine name, whose address is addr in ns; ns is
// closed with it. binDir holds kubeadm and kubectl, staticpodd is the binary
// under test, kubelet the node agent on PATH as kubelet (staticpodd itself,
// as the staticpodd-kubeadm package's /usr/bin/kubelet, or the real one),
// crictl cri-tools'. The node agent is not started: kubeadm starts it, through
// systemctl.
func NewMachine(t *testing.T, name, addr string, ns *cluster.Netns, binDir, staticpodd, kubelet, crictl string) *Machine {
	t.Helper()
	id := testdaemon.RandHex(4)
	m := &Machine{
		t: t, Name: name, Addr: addr, Dir: t.TempDir(), Ns: ns,
		Cgroup: "/staticpodd-kubeadm-" + id,
		nsDir:  "/run/staticpodd-kubeadm-" + id,
	}
	m.mnt = filepath.Join(m.nsDir, "mnt")
	m.bin = filepath.Join(m.Dir, "bin")
	t.Cleanup(m.close)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("machine %s: %v", name, err)
		}
	}
	must(os.MkdirAll(m.bin, 0o755))
	self, err := filepath.Abs("systemctl")
	must(err)
	m.crictlConfig, err = filepath.Abs("../../packaging/kubeadm/crictl.yaml")
	must(err)
	links := map[string]string{
		"systemctl":  self,
		"staticpodd": staticpodd,
		"kubelet":    kubelet,
		"crictl":     crictl,
		"kubeadm":    filepath.Join(binDir, "kubeadm"),
		"kubectl":    filepath.Join(binDir, "kubectl"),
	}
	// Hard links, not symlinks: the machine's /root hides the host's, where
	// the binaries are cached.
	for n, target := range links {
		must(Link(target, filepath.Join(m.bin, n)))
	}
	must(os.WriteFile(filepath.Join(m.Dir, "hosts"),
		[]byte(fmt.Sprintf("127.0.0.1 localhost\n%s %s\n", addr, name)), 0o644))

	// unshare --mount=FILE keeps the namespace by bind-mounting it on FILE,
	// which must not be on a shared mount (it would propagate, and a
	// namespace may not hold a reference to itself): a private bind of a
	// directory of the machine's own.
	must(os.MkdirAll(m.nsDir, 0o700))
	must(run("mount", "--bind", m.nsDir, m.nsDir))
	must(run("mount", "--make-private", m.nsDir))
	must(os.WriteFile(m.mnt, nil, 0o600))
	must(run("unshare", "--mount="+m.mnt, "--propagation", "private", "true"))

	var script strings.Builder
	for _, p := range MachinePaths {
		src := filepath.Join(m.Dir, "root", p)
		must(os.MkdirAll(src, 0o755))
		fmt.Fprintf(&script, "mkdir -p %[2]s && mount --bind %[1]s %[2]s && ", src, p)
	}
	fmt.Fprintf(&script, "mount --bind %s /etc/hosts", filepath.Join(m.Dir, "hosts"))
	must(run("nsenter", "--mount="+m.mnt, "--", "sh", "-c", script.String()))
	return m
}

// Link makes to a hard link of from, or a copy when they are on different
// filesystems.
func Link(from, to string) error {
	if err := os.Link(from, to); err == nil {
		return nil
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Connect links the network namespaces of a and b with a veth pair and a
// route to each other's address: two machines on one wire, and nothing else.
func Connect(a, b *Machine) error {
	ends := "k" + testdaemon.RandHex(3)
	steps := [][]string{
		{"link", "add", ends + "a", "netns", a.Ns.Name, "type", "veth", "peer", "name", ends + "b", "netns", b.Ns.Name},
		{"-n", a.Ns.Name, "link", "set", ends + "a", "up"},
		{"-n", b.Ns.Name, "link", "set", ends + "b", "up"},
		{"-n", a.Ns.Name, "route", "add", b.Addr + "/32", "dev", ends + "a"},
		{"-n", b.Ns.Name, "route", "add", a.Addr + "/32", "dev", ends + "b"},
	}
	for _, s := range steps {
		if err := run("ip", s...); err != nil {
			return err
		}
	}
	return nil
}

// Host is where the machine's path p (under one of MachinePaths) is on the host.
func (m *Machine) Host(p string) string { return filepath.Join(m.Dir, "root", p) }

// UnitExecStart is the command line, in sh, that systemd runs for a unit
// whose drop-in is dropIn (the staticpodd-kubeadm package's 10-kubeadm.conf):
// its Environment= and EnvironmentFile= (a "-" one may be missing) in order,
// then its last ExecStart=, whose $VAR words split as systemd splits them,
// its program found on PATH.
func UnitExecStart(dropIn string) (string, error) {
	b, err := os.ReadFile(dropIn)
	if err != nil {
		return "", err
	}
	var sh []string
	var exec string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch k {
		case "Environment":
			// Environment="K=V words"
			name, val, _ := strings.Cut(strings.Trim(v, `"`), "=")
			sh = append(sh, fmt.Sprintf("%s='%s'", name, val))
		case "EnvironmentFile":
			if f, optional := strings.CutPrefix(v, "-"); optional {
				sh = append(sh, fmt.Sprintf("if [ -f %[1]s ]; then . %[1]s; fi", f))
			} else {
				sh = append(sh, ". "+v)
			}
		case "ExecStart":
			// The program by name, from the machine's PATH: the package
			// installs it in /usr/bin, which the machine shares with the host.
			prog, args, _ := strings.Cut(v, " ")
			exec = strings.TrimSpace(filepath.Base(prog) + " " + args)
		}
	}
	if exec == "" {
		return "", fmt.Errorf("%s: no ExecStart", dropIn)
	}
	return strings.Join(append(sh, "exec "+exec), "\n"), nil
}

// SetExecStart writes the node agent's "unit": the command the systemctl
// stand-in runs for kubelet.service, a line of sh.
func (m *Machine) SetExecStart(line string) {
	m.t.Helper()
	if err := os.WriteFile(filepath.Join(m.Dir, "kubelet.exec"), []byte(line+"\n"), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// Command is args run on the machine: in its namespaces, with its PATH, as
// root in a login shell in its home would have it (KUBECONFIG is admin.conf, as kubeadm
// init tells root to export).
func (m *Machine) Command(ctx context.Context, args ...string) *exec.Cmd {
	env := []string{
		"PATH=" + m.bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"KUBECONFIG=/etc/kubernetes/admin.conf",
		"SYSTEMCTL_STANDIN_DIR=" + m.Dir,
		// The staticpodd-kubeadm package's /etc/crictl.yaml.
		"CRI_CONFIG_FILE=" + m.crictlConfig,
	}
	return exec.CommandContext(ctx, "nsenter", append([]string{"--mount=" + m.mnt, "--net=" + m.Ns.Path, "--wdns=/root", "--",
		"env", "-i"}, append(env, args...)...)...)
}

// Sh runs a command line of the guide on the machine with sh, within
// timeout, and returns its output (stdout and stderr); it fails the test if
// the command fails.
func (m *Machine) Sh(timeout time.Duration, line string) string {
	m.t.Helper()
	out, err := m.ShErr(timeout, line)
	if err != nil {
		m.t.Fatalf("%s$ %s\n%s\n%v", m.Name, line, out, err)
	}
	return out
}

// ShErr is Sh that returns the command's error instead of failing.
func (m *Machine) ShErr(timeout time.Duration, line string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := m.Command(ctx, "sh", "-c", line).CombinedOutput()
	return string(out), err
}

// Stdout is Sh that returns stdout alone (stderr goes to the test's failure).
func (m *Machine) Stdout(timeout time.Duration, line string) string {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := m.Command(ctx, "sh", "-c", line)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		m.t.Fatalf("%s$ %s\n%s%s\n%v", m.Name, line, out, stderr.Bytes(), err)
	}
	return string(out)
}

// Log is what the node agent wrote, and what kubeadm asked systemctl.
func (m *Machine) Log() string {
	var b strings.Builder
	for _, f := range []string{"systemctl.log", "kubelet.log"} {
		data, _ := os.ReadFile(filepath.Join(m.Dir, f))
		if len(data) > 16<<10 {
			data = data[len(data)-16<<10:]
		}
		fmt.Fprintf(&b, "--- %s (end):\n%s\n", f, data)
	}
	return b.String()
}

// AgentPID is the pid of the node agent the stand-in started (or of the
// socket's holder), 0 if none.
func (m *Machine) AgentPID() int {
	b, _ := os.ReadFile(filepath.Join(m.Dir, "kubelet.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Proc is a process on the machine (in its network namespace).
type Proc struct {
	PID  int
	Comm string
	RSS  int64 // bytes
}

// Procs lists the processes in the machine's network namespace.
func (m *Machine) Procs() ([]Proc, error) {
	ino, err := m.Ns.Inode()
	if err != nil {
		return nil, err
	}
	want := fmt.Sprintf("net:[%d]", ino)
	var procs []Proc
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		if link, err := os.Readlink(filepath.Join(dir, "ns", "net")); err != nil || link != want {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil {
			continue // gone meanwhile
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		procs = append(procs, Proc{PID: pid, Comm: strings.TrimSpace(string(comm)), RSS: rss(dir)})
	}
	return procs, nil
}

// rss is VmRSS of the process at /proc/<pid>, 0 once it is gone.
func rss(dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// close is the safety net after the test's own steps (kubeadm reset): what
// is left of pods is removed by the node agent started on no manifests, then
// the namespaces go. Anything it has to remove is an error of the test.
func (m *Machine) close() {
	t := m.t
	t.Helper()
	if _, err := os.Stat(m.mnt); err != nil {
		return // NewMachine failed before the namespace existed
	}
	m.ShErr(2*time.Minute, "systemctl stop staticpodd-cri.socket; systemctl stop kubelet")
	if pods, _ := os.ReadDir(m.Host("/run/staticpodd/pods")); len(pods) > 0 {
		t.Errorf("machine %s: %d pods left by the test; removing them", m.Name, len(pods))
		m.RemovePods()
	}
	if procs, err := m.Procs(); err != nil || len(procs) > 0 {
		t.Errorf("machine %s: processes left: %v %v", m.Name, procs, err)
		for _, p := range procs {
			syscall9(p.PID)
		}
	}
	if t.Failed() {
		t.Logf("machine %s:\n%s", m.Name, m.Log())
	}
	var errs []error
	errs = append(errs, run("umount", m.mnt), run("umount", m.nsDir), os.RemoveAll(m.nsDir), m.Ns.Close())
	// Whatever the node agent left under its cgroupRoot: a pod's process
	// in a network namespace of its own is not among Procs.
	errs = append(errs, m.RemoveCgroups(false))
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
}

// RemovePods removes every pod of the machine as its operator can without
// a CRI that answers: staticpodd run (staticpodd.service's daemon, on the
// machine's cgroupRoot) on the manifest directory, which kubeadm reset
// emptied, removes the pods it finds, and is stopped once their sandboxes
// are gone. The kubelet personality cannot: reset removed its config.yaml.
func (m *Machine) RemovePods() {
	m.t.Helper()
	cfg := filepath.Join(m.Dir, "cleanup.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupRoot: "+m.Cgroup+"\n"), 0o644); err != nil {
		m.t.Fatal(err)
	}
	exec := filepath.Join(m.Dir, "kubelet.exec")
	unit, err := os.ReadFile(exec)
	if err != nil {
		m.t.Fatal(err)
	}
	defer os.WriteFile(exec, unit, 0o644)
	m.SetExecStart("exec " + CleanupCommand + " --config " + cfg + " --hostname-override " + m.Name)
	// The socket unit stopped first: it would start the kubelet personality.
	m.Sh(time.Minute, "systemctl stop staticpodd-cri.socket; systemctl stop kubelet; rm -f /etc/kubernetes/manifests/*.yaml && systemctl start kubelet")
	defer m.ShErr(2*time.Minute, "systemctl stop kubelet")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods, _ := os.ReadDir(m.Host("/run/staticpodd/pods"))
		if len(pods) == 0 {
			return
		}
		if time.Now().After(deadline) {
			m.t.Errorf("machine %s: %d pods still there after 2 minutes\n%s", m.Name, len(pods), m.Log())
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// CleanupCommand is the daemon RemovePods runs.
const CleanupCommand = "staticpodd run --pod-manifest-path /etc/kubernetes/manifests"

// RemoveCgroups kills what is left in the node agent's cgroups under
// m.Cgroup and removes them, deepest first; keepRoot keeps m.Cgroup itself,
// which a node agent still running expects. It waits on the cgroups
// themselves (a killed process leaves its cgroup once it has exited) and
// says which are left after a minute.
func (m *Machine) RemoveCgroups(keepRoot bool) error {
	var left []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		left = left[:0]
		for _, root := range m.CgroupDirs() {
			var dirs []string
			filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() && (p != root || !keepRoot) {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
					continue
				}
				procs, _ := os.ReadFile(filepath.Join(dirs[i], "cgroup.procs"))
				for _, f := range strings.Fields(string(procs)) {
					if pid, _ := strconv.Atoi(f); pid > 0 {
						syscall9(pid)
					}
				}
				left = append(left, dirs[i])
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("machine %s: cgroups left: %s", m.Name, strings.Join(left, ", "))
		}
	}
}

// CgroupDirs are the existing directories of the node agent's cgroupRoot,
// in every hierarchy.
func (m *Machine) CgroupDirs() []string {
	var dirs []string
	for _, p := range append([]string{"/sys/fs/cgroup"}, globDirs("/sys/fs/cgroup/*")...) {
		if fi, err := os.Stat(filepath.Join(p, m.Cgroup)); err == nil && fi.IsDir() {
			dirs = append(dirs, filepath.Join(p, m.Cgroup))
		}
	}
	return dirs
}

func globDirs(pattern string) []string {
	var dirs []string
	matches, _ := filepath.Glob(pattern)
	for _, p := range matches {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		}
	}
	return dirs
}

// syscall9 kills pid, the last resort for a process the test left.
func syscall9(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
