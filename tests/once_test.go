package tests

import (
	"bytes"
	"errors"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// once runs `staticpodd run --once` on the daemon's config and dirs and
// returns its stdout (the results) and stderr (the log), and its error.
func once(d *daemon, args ...string) (string, string, error) {
	d.T.Helper()
	args = slices.Concat([]string{"run", "--once", "--config", d.Config, "--hostname-override", d.Name,
		"--root-dir", d.RootDir, "--run-dir", d.RunDir, "--registry-config-dir", testdaemon.RegistryDir}, d.NetArgs(), args)
	cmd := exec.Command(testdaemon.Bin, args...)
	var out, log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &log
	err := cmd.Run()
	return out.String(), log.String(), err
}

// resultRow returns the fields of the results line of the pod name, or nil.
func resultRow(out, name string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == name {
			return f
		}
	}
	return nil
}

// cgroupPIDs lists every process in the cgroups under the daemon's cgroupRoot.
func cgroupPIDs(d *daemon) []int {
	var pids []int
	filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", d.Cgroup), func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() || de.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return nil
	})
	return pids
}

// The appliance's first boot: run --once imports the images put in the
// import folder, starts every pod, waits until each runs or has finished,
// prints a line per pod and exits 0, leaving the pods running for the daemon
// that starts next, which adopts them as they are.
func TestRunOnce(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	tar := filepath.Join(d.Dir, "boot.tar")
	buildImage(t, tar, "-ref", "example.com/boot:v1")
	importDir := filepath.Join(d.RootDir, "images", "import")
	if err := os.MkdirAll(importDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tar, filepath.Join(importDir, "boot.tar")); err != nil {
		t.Fatal(err)
	}
	d.WriteManifest("web.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: example.com/boot:v1
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`)
	d.WriteManifest("job.yaml", `apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "sleep 1; echo done"]
`)
	out, log, err := once(d)
	if err != nil {
		t.Fatalf("run --once: %v\n%s\nlog:\n%s", err, out, log)
	}
	if row := resultRow(out, "web-"+d.Name); len(row) < 4 || row[2] != "Running" || row[3] != "Running" {
		t.Errorf("web: %q\n%s", row, out)
	}
	if row := resultRow(out, "job-"+d.Name); len(row) < 4 || row[2] != "Succeeded" || row[3] != "Completed" {
		t.Errorf("job: %q\n%s", row, out)
	}
	if !strings.Contains(log, "imported images") {
		t.Errorf("the import folder was not imported:\n%s", log)
	}
	pids := cgroupPIDs(d)
	if len(pids) == 0 {
		t.Fatal("no process left running after run --once")
	}

	d.Start()
	web := d.WaitRunning("web", 30*time.Second)
	if pid := containerPID(d, web, "main"); !slices.Contains(pids, pid) {
		t.Errorf("web's container is pid %d, not one run --once left (%v): restarted?", pid, pids)
	}
	if rc := web.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("web restartCount %d after the daemon adopted it, want 0", rc)
	}
	// The daemon says it adopted the pods.
	d.WaitLine(10*time.Second, "found existing pods")
}

// run --once fails at once, not at its timeout, when a pod cannot start
// without a change (its image is in no store and no import folder, and its
// policy forbids a pull), and for
// a manifest it cannot use; it says why, and the pods that run keep running.
func TestRunOnceFails(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("web.yaml", sleeper("web", ""))
	d.WriteManifest("etcd.yaml", `apiVersion: v1
kind: Pod
metadata: {name: etcd, namespace: kube-system}
spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.21-0
    imagePullPolicy: Never
`)
	d.WriteManifest("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers: []\n")
	out, log, err := once(d, "--once-timeout", "10m")
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("run --once: %v, want a failure\n%s\nlog:\n%s", err, out, log)
	}
	if row := resultRow(out, "web-"+d.Name); len(row) < 4 || row[2] != "Running" {
		t.Errorf("web: %q\n%s", row, out)
	}
	row := resultRow(out, "etcd-"+d.Name)
	if len(row) < 4 || row[2] != "Failed" || row[3] != "ErrImageNeverPull" ||
		!strings.Contains(out, "pull policy of Never") || !strings.Contains(out, "staticpodd images import") {
		t.Errorf("etcd: %q\n%s", row, out)
	}
	if row := resultRow(out, filepath.Join(d.Manifests, "bad.yaml")); len(row) < 3 || row[2] != "Invalid" {
		t.Errorf("bad.yaml: %q\n%s", row, out)
	}
	if want := "2 of 3 did not run; the others keep running"; !strings.Contains(log, want) {
		t.Errorf("stderr lacks %q:\n%s", want, log)
	}
	if len(cgroupPIDs(d)) == 0 {
		t.Error("web stopped with run --once")
	}
}
