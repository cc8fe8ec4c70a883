//go:build linux && cgo

package oci

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/sandbox"
	"github.com/staticpodd/staticpodd/rootfs/busybox"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

const testImage = "docker.io/library/busybox:test"

// busyboxDir is the test image's rootfs (rootfs/busybox), shared read-only
// by all tests (the lower layer of every container's overlay).
var busyboxDir string

func TestMain(m *testing.M) {
	if Reexec() {
		return
	}
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	code := m.Run()
	if busyboxDir != "" {
		_ = os.RemoveAll(filepath.Dir(busyboxDir))
	}
	os.Exit(code)
}

// makeBusybox builds the busybox rootfs once.
func makeBusybox(t *testing.T) string {
	t.Helper()
	if busyboxDir != "" {
		return busyboxDir
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox not installed (apt-get install busybox-static): %v", err)
	}
	top, err := os.MkdirTemp("", "oci-busybox-")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "rootfs")
	if err := busybox.WriteDir(dir, bb); err != nil {
		t.Fatal(err)
	}
	busyboxDir = dir
	return dir
}

// overlayStore is a real ImageStore over one image: each key gets an overlay
// with its own upper dir. Paths derive from the key alone, so a second
// process (a restarted daemon) can release what a first one prepared.
type overlayStore struct {
	lower, dir string
	stopSignal string // the image's StopSignal
}

func (s overlayStore) paths(key string) (upper, work, merged string) {
	d := filepath.Join(s.dir, key)
	return filepath.Join(d, "upper"), filepath.Join(d, "work"), filepath.Join(d, "merged")
}

func (s overlayStore) Prepare(key, ref string) (string, image.Image, error) {
	upper, work, merged := s.paths(key)
	// A key prepared before is mounted already, as image.Store.Prepare
	// finds it (the snapshot a sandbox's ahead prepared), and is refused
	// for another image, as image.Store refuses it.
	marker := filepath.Join(s.dir, key, "image")
	if b, err := os.ReadFile(marker); err == nil {
		if string(b) != ref {
			return "", image.Image{}, fmt.Errorf("snapshot exists for image %s", b)
		}
		img, err := s.Get(ref)
		return merged, img, err
	}
	if ref != testImage {
		return "", image.Image{}, fmt.Errorf("image %s: %w", ref, podspec.ErrImageNotPresent)
	}
	for _, d := range []string{upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", image.Image{}, err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", s.lower, upper, work)
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return "", image.Image{}, fmt.Errorf("mount overlay %s: %w", merged, err)
	}
	if err := os.WriteFile(marker, []byte(ref), 0o600); err != nil {
		return "", image.Image{}, err
	}
	img, err := s.Get(ref)
	return merged, img, err
}

func (s overlayStore) Get(ref string) (image.Image, error) {
	if ref != testImage {
		return image.Image{}, fmt.Errorf("image %s: %w", ref, podspec.ErrImageNotPresent)
	}
	return image.Image{ID: "sha256:test", Config: imagespec.ImageConfig{Env: []string{"PATH=/bin"}, StopSignal: s.stopSignal}}, nil
}

func (s overlayStore) Snapshots() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Name())
	}
	return keys, nil
}

func (s overlayStore) Release(key string) error {
	_, _, merged := s.paths(key)
	if err := unix.Unmount(merged, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return os.RemoveAll(filepath.Join(s.dir, key))
}

// env is one test's runtime and everything it needs.
type env struct {
	t     *testing.T
	cfg   Config
	store overlayStore
	rt    *Runtime
	logs  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testroot.Require(t)
	lower := makeBusybox(t)
	top := t.TempDir()
	e := &env{t: t, logs: filepath.Join(top, "logs")}
	e.store = overlayStore{lower: lower, dir: filepath.Join(top, "store")}
	e.cfg = Config{
		RunDir:     filepath.Join(top, "run"),
		RootDir:    filepath.Join(top, "root"),
		CgroupRoot: "/staticpodd-test-" + randHex(4),
		Images:     e.store,
	}
	e.rt = e.newRuntime()
	t.Cleanup(func() { removeCgroupEverywhere(t, e.cfg.CgroupRoot) })
	return e
}

func (e *env) newRuntime() *Runtime {
	e.t.Helper()
	rt, err := New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := rt.Recover(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	rt.Start(context.Background())
	return rt
}

// podDir is pod uid's sandbox directory, where the tests look at its
// record (podFile) and namespaces (nsNet) as package sandbox lays them out;
// execsDir, in a container's state dir, holds the records package exec
// keeps of its processes.
func (r *Runtime) podDir(uid string) string {
	return filepath.Join(r.cfg.RunDir, sandbox.Dir, uid)
}

const (
	podFile  = "pod.json"
	nsNet    = "net"
	execsDir = "exec"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *env) pod(hostNetwork bool) *podspec.Pod {
	uid := randHex(8)
	return &podspec.Pod{
		UID: uid, Namespace: "default", Name: "p" + uid[:6] + "-node", Hostname: "p" + uid[:6],
		HostNetwork: hostNetwork, LogDir: filepath.Join(e.logs, "default_p_"+uid),
	}
}

func (e *env) sandbox(pod *podspec.Pod) {
	e.t.Helper()
	if err := e.rt.CreateSandbox(context.Background(), pod); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) container(pod *podspec.Pod, name, script string) *podspec.Container {
	return &podspec.Container{
		Name: name, Image: testImage, Command: []string{"sh", "-c", script},
		LogPath: filepath.Join(pod.LogDir, name, "0.log"), Hash: "h-" + name,
	}
}

func (e *env) start(pod *podspec.Pod, c *podspec.Container) podspec.ContainerStatus {
	e.t.Helper()
	begin := time.Now()
	st, err := e.rt.StartContainer(context.Background(), pod, c)
	if err != nil {
		// A container whose init failed is still there: destroyed here, so
		// that the failing test's sandbox removal does not leave its
		// mounts behind.
		if all, lerr := e.rt.List(context.Background()); lerr == nil {
			for _, cs := range all {
				if cs.PodUID == pod.UID && cs.Name == c.Name {
					_ = e.rt.Destroy(context.Background(), cs.ID)
				}
			}
		}
		e.t.Fatal(err)
	}
	e.t.Logf("Start of %s took %v (call to exec)", c.Name, time.Since(begin))
	return st
}

func (e *env) wait(id string) podspec.ContainerStatus {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := e.rt.Wait(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) destroy(id string) {
	e.t.Helper()
	if err := e.rt.Destroy(context.Background(), id); err != nil {
		e.t.Fatal(err)
	}
}

// logLines returns the stream and content of each CRI log entry of c.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 4)
		if len(fields) != 4 {
			t.Fatalf("malformed CRI log line %q", sc.Text())
		}
		if _, err := time.Parse(time.RFC3339Nano, fields[0]); err != nil {
			t.Fatalf("CRI log line %q: %v", sc.Text(), err)
		}
		out = append(out, fields[1]+" "+fields[2]+" "+fields[3])
	}
	return out
}

// removeCgroupEverywhere removes a test's cgroup root from every hierarchy.
func removeCgroupEverywhere(t *testing.T, root string) {
	for _, d := range cgroupDirs(t, root) {
		_ = os.Remove(d)
	}
}

// cgroupDirs lists where cgroup path p would be in every mounted hierarchy.
func cgroupDirs(t *testing.T, p string) []string {
	t.Helper()
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{filepath.Join("/sys/fs/cgroup", p)}
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name(), p))
		}
	}
	return dirs
}

// waitPidExit blocks until process pid (not our child) has exited.
func waitPidExit(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(timeout)
	for {
		// A signal to the test (the Go runtime's preemption among them)
		// interrupts the poll: poll again for what is left.
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(max(time.Until(deadline), 0).Milliseconds()))
		if errors.Is(err, unix.EINTR) && time.Now().Before(deadline) {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("process %d still running after %v (err %v)", pid, timeout, err)
		}
		return
	}
}
