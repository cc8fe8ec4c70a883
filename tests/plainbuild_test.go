package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// plainNoSeccomp is what a binary built without the seccomp tag says of a
// container with a seccomp profile (oci.Features.SeccompMissing).
const plainNoSeccomp = "built without seccomp support"

// A plain `go build ./cmd/staticpodd` (no tags: no seccomp, no embedded
// monitor) says what it lacks where it matters: version, check and validate
// name it, and the daemon runs unconfined pods but refuses a pod with a
// seccompProfile at once, with the build command that works, instead of
// crash-looping on libcontainer's "seccomp not supported".
func TestPlainBuild(t *testing.T) {
	root, err := testdaemon.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "staticpodd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/staticpodd")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if tags := buildInfo(t, bin)["-tags"]; tags != "" {
		t.Fatalf("the plain build has tags %q", tags)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	dir := t.TempDir()
	confined := sleeper("confined", "  securityContext:\n    seccompProfile: {type: RuntimeDefault}\n")
	free := sleeper("free", "")

	t.Run("version", func(t *testing.T) {
		out, err := run("version")
		if err != nil || !strings.Contains(out, "build tags: none\n") || !strings.Contains(out, "seccomp: no: ") ||
			!strings.Contains(out, "make build") || !strings.Contains(out, "embedded monitor: no") {
			t.Errorf("version: %v\n%s", err, out)
		}
	})
	t.Run("check", func(t *testing.T) {
		out, err := run("check")
		if err == nil || !strings.Contains(out, "check failed: seccomp: ") || !strings.Contains(out, plainNoSeccomp) || !strings.Contains(out, "make build") {
			t.Errorf("check: %v\n%s", err, out)
		}
	})
	t.Run("validate", func(t *testing.T) {
		for name, doc := range map[string]string{"confined.yaml": confined, "free.yaml": free} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, err := run("validate", "--hostname-override", "n", dir)
		want := "error: " + filepath.Join(dir, "confined.yaml") + ": spec.securityContext.seccompProfile: seccompProfile RuntimeDefault: this staticpodd was " + plainNoSeccomp
		if err == nil || !strings.Contains(out, want) || !strings.Contains(out, "make build") ||
			!strings.Contains(out, "ok: "+filepath.Join(dir, "free.yaml")) || !strings.Contains(out, "2 file(s), 1 pod(s), 1 error(s)") {
			t.Errorf("validate: %v, want it to fail with %q\n%s", err, want, out)
		}
	})
	t.Run("daemon", func(t *testing.T) {
		d := newDaemon(t)
		d.Bin = bin
		d.Start()
		d.WriteManifest("confined.yaml", confined)
		d.WriteManifest("free.yaml", free)
		// Unconfined pods run, their monitors as the binary itself.
		pod := d.WaitRunning("free", 30*time.Second)
		mon := ppid(containerPID(d, pod, "main"))
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", mon)); err != nil || exe != bin {
			t.Errorf("the monitor %d runs %q (%v), want the daemon's binary %s", mon, exe, err, bin)
		}
		msg := waitingFor(d, "confined", "main", "CreateContainerConfigError", 30*time.Second)
		if !strings.Contains(msg, "seccompProfile RuntimeDefault: this staticpodd was "+plainNoSeccomp) || !strings.Contains(msg, "make build") {
			t.Errorf("the confined pod waits with %q", msg)
		}
		// Never started, so never crash-looping.
		for _, cs := range d.Pod("confined").Status.ContainerStatuses {
			if cs.RestartCount != 0 || cs.ContainerID != "" || cs.LastTerminationState.Terminated != nil {
				t.Errorf("the confined container was started: %+v", cs)
			}
		}
		// Refused once, when the pod was taken on: one Failed event, not one per sync.
		var events v1.EventList
		if err := json.Unmarshal([]byte(d.CLI("events", "-o", "json")), &events); err != nil {
			t.Fatal(err)
		}
		refusals := 0
		for _, e := range events.Items {
			if strings.HasPrefix(e.InvolvedObject.Name, "confined-") && strings.Contains(e.Message, plainNoSeccomp) {
				refusals += int(max(e.Count, 1))
			}
		}
		if refusals != 1 {
			t.Errorf("%d events of the refusal, want 1: %+v", refusals, events.Items)
		}
		out := d.WaitOutput(10*time.Second, "the build's warning", func(out string) bool {
			return strings.Contains(out, "containers that need what this build lacks will not start")
		})
		if n := strings.Count(out, "containers that need what this build lacks will not start"); n != 1 {
			t.Errorf("the daemon warned %d times of its build, want once:\n%s", n, out)
		}
		if strings.Contains(out, "seccomp not supported") {
			t.Errorf("a container was started with a seccomp profile:\n%s", out)
		}
		d.RemoveManifest("confined.yaml")
		d.RemoveManifest("free.yaml")
		d.Eventually(30*time.Second, "the pods are gone", func() error {
			if d.Pod("confined") != nil || d.Pod("free") != nil {
				return errStill
			}
			return nil
		})
	})
}
