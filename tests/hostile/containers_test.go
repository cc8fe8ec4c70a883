package hostile

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// importImage writes img as a docker-archive and imports it into d's store.
func importImage(t *testing.T, d *testdaemon.Daemon, ref string, img v1.Image) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.tar")
	writeDocker(t, p, ref, img)
	d.CLI("images", "import", p)
}

// waitState waits until the pod's only container is in a state ok accepts.
func waitState(t *testing.T, d *testdaemon.Daemon, pod string, timeout time.Duration, what string, ok func(corev1.ContainerState) error) corev1.ContainerState {
	t.Helper()
	var st corev1.ContainerState
	d.Eventually(timeout, pod+": "+what, func() error {
		p := d.Pod(pod)
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("no container status yet")
		}
		st = p.Status.ContainerStatuses[0].State
		return ok(st)
	})
	return st
}

func waiting(reason, message string) func(corev1.ContainerState) error {
	return func(st corev1.ContainerState) error {
		if st.Waiting == nil || st.Waiting.Reason != reason || !strings.Contains(st.Waiting.Message, message) {
			return fmt.Errorf("state %+v, want waiting %s with %q", st, reason, message)
		}
		return nil
	}
}

func terminated(st corev1.ContainerState) error {
	if st.Terminated == nil {
		return fmt.Errorf("state %+v", st)
	}
	return nil
}

// podYAML is a one-container pod of image running script, with an emptyDir at
// each of mounts.
func podYAML(name, image, script string, mounts ...string) string {
	var vols, vms strings.Builder
	for i, m := range mounts {
		fmt.Fprintf(&vols, "  - {name: v%d, emptyDir: {}}\n", i)
		fmt.Fprintf(&vms, "    - {name: v%d, mountPath: %s}\n", i, m)
	}
	s := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, name, image, script)
	if len(mounts) > 0 {
		s += "    volumeMounts:\n" + vms.String() + "  volumes:\n" + vols.String()
	}
	return s
}

// TestHostileImageContent runs containers of images whose content aims at the
// host: device nodes of the host's memory and disk, symlinks where the runtime
// puts mounts, the working directory and /etc/hosts, and an /etc/passwd that
// links to a host file. The container cannot open the devices, everything the
// runtime makes or mounts stays inside the container, and the daemon never
// reads the host file through the image's symlink.
func TestHostileImageContent(t *testing.T) {
	t.Parallel()
	d := testdaemon.New(t)
	c := plantCanary(t)
	write(t, filepath.Join(c.Dir, "passwd"), "hostuser:x:4242:4242::/:/bin/sh\n", 0o644)
	write(t, filepath.Join(c.Dir, "hosts"), "127.0.0.1 canary\n", 0o644)
	c.before = tree(t, c.Dir)
	base := busybox(t, testdaemon.Image)
	major, minor := rootDevice(t)

	importImage(t, d, "hostile/content:v1", imageOf(t, base, func(cfg *v1.Config) { cfg.WorkingDir = "/wd/sub" }, []entry{
		{name: "hostile/", typ: tar.TypeDir, mode: 0o755},
		{name: "hostile/mem", typ: tar.TypeChar, mode: 0o666, major: 1, minor: 1},
		{name: "hostile/disk", typ: tar.TypeBlock, mode: 0o666, major: major, minor: minor},
		{name: "escape", typ: tar.TypeSymlink, link: c.Dir},
		{name: "wd", typ: tar.TypeSymlink, link: c.Dir},
		{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "etc/hosts", typ: tar.TypeSymlink, link: filepath.Join(c.Dir, "hosts")},
		{name: "etc/resolv.conf", typ: tar.TypeSymlink, link: up + c.Dir[1:] + "/resolv.conf"},
	}))
	for ref, link := range map[string]string{
		"hostile/passwd-abs:v1": filepath.Join(c.Dir, "passwd"),
		"hostile/passwd-rel:v1": up + c.Dir[1:] + "/passwd",
	} {
		importImage(t, d, ref, imageOf(t, base, func(cfg *v1.Config) { cfg.User = "hostuser" }, []entry{
			{name: "etc/", typ: tar.TypeDir, mode: 0o755},
			{name: "etc/passwd", typ: tar.TypeSymlink, link: link},
		}))
	}
	d.Start()

	script := fmt.Sprintf(`
try() { if "$@" >/dev/null 2>&1; then echo READ; else echo DENIED; fi; }
echo disk:$(try head -c 16 /hostile/disk)
echo mem:$(try head -c 16 /hostile/mem)
mknod /tmp/disk b %d %d 2>/dev/null
echo mknod-disk:$(try head -c 16 /tmp/disk)
echo cwd:$(pwd)
echo pwned > ./pwned; echo pwned > /escape/pwned; echo pwned >> /etc/hosts; echo pwned >> /etc/resolv.conf
echo done`, major, minor)
	d.WriteManifest("content.yaml", podYAML("content", "hostile/content:v1", script, "/escape"))
	d.WriteManifest("passwd-abs.yaml", podYAML("passwd-abs", "hostile/passwd-abs:v1", "id -u"))
	d.WriteManifest("passwd-rel.yaml", podYAML("passwd-rel", "hostile/passwd-rel:v1", "id -u"))

	t.Run("devices-and-symlinked-mount-points", func(t *testing.T) {
		st := waitState(t, d, "content", 30*time.Second, "terminated", terminated)
		out := d.CLI("logs", "content")
		t.Logf("exit %d, output:\n%s", st.Terminated.ExitCode, out)
		for _, want := range []string{"disk:DENIED", "mem:DENIED", "mknod-disk:DENIED", "cwd:" + c.Dir + "/sub", "done"} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("container output lacks %q", want)
			}
		}
	})
	for _, name := range []string{"passwd-abs", "passwd-rel"} {
		t.Run("etc-passwd-symlink-to-host/"+name[len("passwd-"):], func(t *testing.T) {
			// Followed onto the host, the link would find hostuser (uid 4242)
			// and the container would run.
			st := waitState(t, d, name, 30*time.Second, "refused: no hostuser in the image", waiting("CreateContainerConfigError", "hostuser"))
			t.Logf("%s: %s", st.Waiting.Reason, st.Waiting.Message)
		})
	}
	c.check(t)
	if devs := devicesUnder(t, d.Dir, d.RootDir); len(devs) > 0 {
		t.Errorf("device nodes outside the store and the pods: %v", devs)
	}
}

// TestHostileImagePasswdFIFO runs an image whose /etc/passwd is a FIFO. The
// daemon reads the image's /etc/passwd to resolve the user; a FIFO with no
// writer must not hold the pod (or other pods) for ever.
func TestHostileImagePasswdFIFO(t *testing.T) {
	t.Parallel()
	t.Run("etc-passwd-is-a-fifo", func(t *testing.T) {
		d := testdaemon.New(t)
		importImage(t, d, "hostile/fifo:v1", imageOf(t, busybox(t, testdaemon.Image), nil, []entry{
			{name: "etc/", typ: tar.TypeDir, mode: 0o755},
			{name: "etc/passwd", typ: tar.TypeFifo, mode: 0o644},
		}))
		// Before the harness's cleanup: wake, for a while, whatever blocks
		// opening the FIFO (the daemon, then runc's init inside the
		// container), so that the pod can be created, then removed.
		t.Cleanup(func() {
			for range 20 {
				ps, _ := filepath.Glob(filepath.Join(d.RootDir, "images", "snapshots", "*", "rootfs", "etc", "passwd"))
				for _, p := range ps {
					if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
						wakeFIFO(p)
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
		d.Start()
		d.WriteManifest("fifo.yaml", podYAML("fifo", "hostile/fifo:v1", "sleep 3600"))
		deadline := time.Now().Add(15 * time.Second)
		var st corev1.ContainerState
		for time.Now().Before(deadline) {
			if p := d.Pod("fifo"); p != nil && len(p.Status.ContainerStatuses) == 1 {
				st = p.Status.ContainerStatuses[0].State
				if st.Waiting != nil && st.Waiting.Reason == "CreateContainerConfigError" {
					break
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		if st.Waiting == nil || st.Waiting.Reason != "CreateContainerConfigError" || !strings.Contains(st.Waiting.Message, "/etc/passwd") {
			t.Errorf("15s after the manifest the container is %+v, want CreateContainerConfigError naming /etc/passwd", st)
		}
		// Another pod must not wait for this one.
		d.WriteManifest("other.yaml", podYAML("other", "busybox", "sleep 3600"))
		if waitRunningWithin(d, "other", 15*time.Second) != nil {
			t.Errorf("a second pod did not start within 15s while the first waits on the FIFO")
		}
	})
}

// waitRunningWithin is WaitRunning that returns an error instead of failing.
func waitRunningWithin(d *testdaemon.Daemon, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p := d.Pod(name)
		if p != nil && p.Status.Phase == corev1.PodRunning {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not running after %s", name, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// wakeFIFO opens the FIFO at p as a writer and closes it again: a reader
// blocked opening it gets an empty file.
func wakeFIFO(p string) {
	fd, err := syscall.Open(p, syscall.O_RDWR|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	time.Sleep(200 * time.Millisecond)
	syscall.Close(fd)
}
