package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// dirNames returns the names in dir, sorted; none if it does not exist.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// Many quick edits of one manifest, each a rename over the file as sed -i and
// configuration management do, run only the newest generation and leave
// nothing on the host of the generations that were replaced or never started;
// removing the manifest then leaves nothing at all.
func TestRapidEditsLeaveNothing(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	gen := func(n int) string {
		return sleeper("edit", fmt.Sprintf("    env:\n    - {name: GEN, value: %q}\n", strconv.Itoa(n)))
	}
	d.WriteManifest("edit.yaml", gen(0))
	d.WaitRunning("edit", 30*time.Second)
	const edits = 50
	for n := 1; n <= edits; n++ {
		d.WriteManifest("edit.yaml", gen(n))
	}
	var pod *v1.Pod
	d.Eventually(60*time.Second, "the last generation running", func() error {
		pod = d.Pod("edit")
		if pod == nil || len(pod.Spec.Containers) != 1 || len(pod.Spec.Containers[0].Env) != 1 {
			return fmt.Errorf("pod %+v", pod)
		}
		if gen := pod.Spec.Containers[0].Env[0].Value; gen != strconv.Itoa(edits) {
			return fmt.Errorf("generation %s", gen)
		}
		if cs := pod.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil {
			return fmt.Errorf("not running: %+v", pod.Status.ContainerStatuses)
		}
		return nil
	})
	// While it runs, it alone has a pod directory, a log directory and a sandbox.
	for dir, want := range map[string]string{
		filepath.Join(d.RootDir, "pods"): string(pod.UID),
		filepath.Join(d.RunDir, "pods"):  string(pod.UID),
		d.LogsDir:                        fmt.Sprintf("default_%s_%s", pod.Name, pod.UID),
	} {
		if got := dirNames(t, dir); !slices.Equal(got, []string{want}) {
			t.Errorf("%s holds %v after %d edits, want only [%s]", dir, got, edits, want)
		}
	}
	d.RemoveManifest("edit.yaml")
	d.Eventually(30*time.Second, "the pod is gone", func() error {
		if d.Pod("edit") != nil {
			return errStill
		}
		return nil
	})
	d.AssertNoLeaks()
}

// Pod directories under <root-dir>/pods that no manifest and no container
// claims when the daemon starts (left by a daemon that died, or by an older
// version) are gone by READY=1, a memory emptyDir's tmpfs unmounted first.
// The directory of a pod that runs on stays, and a pod whose manifest went
// while the daemon was down keeps its emptyDir until its container stopped.
func TestLeftoverPodDirsSweptAtStart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	results := filepath.Join(d.Dir, "results")
	os.MkdirAll(results, 0o755)
	d.WriteManifest("keep.yaml", sleeper("keep", `    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - name: data
    emptyDir: {medium: Memory}
`))
	d.WriteManifest("moved.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: moved}
spec:
  terminationGracePeriodSeconds: 5
  volumes:
  - {name: s, hostPath: {path: %s}}
  - {name: data, emptyDir: {}}
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo x > /data/marker; trap 'cat /data/marker > /s/at-term; exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts:
    - {name: s, mountPath: /s}
    - {name: data, mountPath: /data}
`, results))
	keep := d.WaitRunning("keep", 30*time.Second)
	pid := containerPID(d, keep, "main")
	moved := d.WaitRunning("moved", 30*time.Second)
	d.Stop()

	d.RemoveManifest("moved.yaml")
	leftovers := []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "leftover-with-tmpfs"}
	for _, uid := range leftovers {
		dir := filepath.Join(d.RootDir, "pods", uid, "volumes", "kubernetes.io~empty-dir", "data")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if uid == "leftover-with-tmpfs" {
			if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
		}
		if err := os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	sock, path := newNotifySocket(t)
	d.Env = []string{"NOTIFY_SOCKET=" + path}
	d.Start()
	sock.next(t, "READY=1", 30*time.Second)
	got := dirNames(t, filepath.Join(d.RootDir, "pods"))
	for _, uid := range leftovers {
		if slices.Contains(got, uid) {
			t.Errorf("leftover pod directory %s still there at READY=1", uid)
		}
	}
	if !slices.Contains(got, string(keep.UID)) {
		t.Errorf("the running pod's directory %s was removed; pods dir holds %v", keep.UID, got)
	}
	if p := d.WaitRunning("keep", 10*time.Second); containerPID(d, p, "main") != pid {
		t.Errorf("the running pod was restarted")
	}
	d.Eventually(30*time.Second, "the removed pod's directory gone", func() error {
		if slices.Contains(dirNames(t, filepath.Join(d.RootDir, "pods")), string(moved.UID)) {
			return errStill
		}
		return nil
	})
	if b, err := os.ReadFile(filepath.Join(results, "at-term")); err != nil || string(b) != "x\n" {
		t.Errorf("the removed pod's emptyDir at its SIGTERM held %q (%v), want its marker", b, err)
	}
}
