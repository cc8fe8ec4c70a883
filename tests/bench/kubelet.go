package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

// benchKubelet is the real kubelet, standalone, on a containerd of its own
// (its root, state and socket under dir), started as the conformance
// harness starts it (tests/conformance/kubelet_test.go): the peer the
// probe benchmark measures against.
type benchKubelet struct {
	dir, sock, manifests string
	podsURL              string
	containerd, kubelet  *exec.Cmd
	logs                 *os.File
}

// kubeletCgroup is the bench kubelet's cgroupRoot.
const kubeletCgroup = "/staticpodd-bench-kubelet"

func startBenchKubelet(bin, image string) (*benchKubelet, error) {
	for _, tool := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is missing (apt-get install -y containerd): %w", tool, err)
		}
	}
	// Short: containerd's socket path must fit in sun_path.
	dir, err := os.MkdirTemp("", "spbk-")
	if err != nil {
		return nil, err
	}
	k := &benchKubelet{dir: dir, sock: filepath.Join(dir, "containerd.sock"), manifests: filepath.Join(dir, "manifests")}
	if k.logs, err = os.Create(filepath.Join(dir, "output")); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			k.stop()
		}
	}()
	for _, d := range []string{k.manifests, filepath.Join(dir, "cni", "net.d"), filepath.Join(dir, "cni", "bin")} {
		os.MkdirAll(d, 0o755)
	}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), k.sock, filepath.Join(dir, "cni", "bin"), filepath.Join(dir, "cni", "net.d"))
	os.WriteFile(filepath.Join(dir, "containerd.toml"), []byte(cfg), 0o644)
	if k.containerd, err = k.spawn("containerd", "--config", filepath.Join(dir, "containerd.toml")); err != nil {
		return nil, err
	}
	if err := poll(30*time.Second, func() bool { _, err := k.ctr("version"); return err == nil }); err != nil {
		return nil, fmt.Errorf("containerd: %v\n%s", err, k.tail())
	}
	pause := filepath.Join(dir, "pause.tar")
	mk := exec.Command("go", "run", "./rootfs/mkimage", "-busybox", "/bin/busybox", "-o", pause,
		"-ref", "registry.k8s.io/pause:3.10", "-cmd", `["sh","-c","trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]`)
	if out, err := mk.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pause image: %v\n%s", err, out)
	}
	for _, img := range []string{image, pause} {
		if out, err := k.ctr("-n", "k8s.io", "images", "import", img); err != nil {
			return nil, fmt.Errorf("import %s into containerd: %v\n%s", img, err, out)
		}
	}
	for _, c := range cgroupHierarchies() {
		os.MkdirAll(filepath.Join(c, kubeletCgroup), 0o755)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	k.podsURL = fmt.Sprintf("http://127.0.0.1:%d/pods", port)
	os.WriteFile(filepath.Join(dir, "kubelet.yaml"), []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
address: 127.0.0.1
port: 0
readOnlyPort: %d
healthzPort: 0
failSwapOn: false
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
enforceNodeAllocatable: []
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, k.manifests, port, kubeletCgroup, k.sock, filepath.Join(dir, "logs"))), 0o644)
	if k.kubelet, err = k.spawn(bin, "--config", filepath.Join(dir, "kubelet.yaml"),
		"--root-dir", filepath.Join(dir, "kubelet"), "--hostname-override", "bench", "--v=0"); err != nil {
		return nil, err
	}
	if err := poll(60*time.Second, func() bool { _, err := k.pods(); return err == nil }); err != nil {
		return nil, fmt.Errorf("the kubelet's /pods: %v\n%s", err, k.tail())
	}
	ok = true
	return k, nil
}

func (k *benchKubelet) spawn(bin string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = k.logs, k.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return cmd, nil
}

func (k *benchKubelet) ctr(args ...string) ([]byte, error) {
	return exec.Command("ctr", append([]string{"--address", k.sock}, args...)...).CombinedOutput()
}

func (k *benchKubelet) tail() string {
	b, _ := os.ReadFile(k.logs.Name())
	return string(b[max(0, len(b)-8192):])
}

func (k *benchKubelet) pods() ([]v1.Pod, error) {
	resp, err := http.Get(k.podsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list v1.PodList
	err = json.NewDecoder(resp.Body).Decode(&list)
	return list.Items, err
}

// shims are the pids of containerd's shims of this containerd.
func (k *benchKubelet) shims() []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "containerd-shim-runc-v2") || !strings.Contains(string(b), k.sock) {
			continue
		}
		var pid int
		fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid)
		pids = append(pids, pid)
	}
	return pids
}

// stop removes the pods as the kubelet does (their manifests go), then
// stops the kubelet and containerd, and removes what containerd left.
func (k *benchKubelet) stop() {
	if k.kubelet != nil {
		files, _ := filepath.Glob(filepath.Join(k.manifests, "*"))
		for _, f := range files {
			os.Remove(f)
		}
		poll(5*time.Minute, func() bool { p, err := k.pods(); return err == nil && len(p) == 0 })
		terminate(k.kubelet)
	}
	if k.containerd != nil {
		out, _ := k.ctr("-n", "k8s.io", "tasks", "ls", "-q")
		for _, id := range strings.Fields(string(out)) {
			k.ctr("-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id)
		}
		poll(time.Minute, func() bool {
			out, _ := k.ctr("-n", "k8s.io", "tasks", "ls", "-q")
			return len(strings.Fields(string(out))) == 0
		})
		out, _ = k.ctr("-n", "k8s.io", "containers", "ls", "-q")
		for _, id := range strings.Fields(string(out)) {
			k.ctr("-n", "k8s.io", "containers", "rm", id)
		}
		terminate(k.containerd)
	}
	for _, pid := range k.shims() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	unmountUnder(k.dir)
	for _, c := range cgroupHierarchies() {
		removeCgroupTree(filepath.Join(c, kubeletCgroup))
	}
	k.logs.Close()
	os.RemoveAll(k.dir)
}

// terminate SIGTERMs cmd's process group, then SIGKILLs it after 10 s.
func terminate(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// unmountUnder unmounts every mount under dir, deepest first.
func unmountUnder(dir string) {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

// removeCgroupTree removes the empty cgroup dir and those under it.
func removeCgroupTree(dir string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			continue
		}
	}
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (and the v2 one,
// alone or beside them).
func cgroupHierarchies() []string {
	var out []string
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
			out = append(out, p)
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		out = append(out, "/sys/fs/cgroup")
	}
	return out
}
