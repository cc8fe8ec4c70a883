//go:build linux && cgo

package oci

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// A debug container joins the pod's network namespace and, with a target,
// the target's PID namespace; its exit code comes back, and nothing of it
// is left: no state dir, libcontainer state, snapshot or cgroup.
func TestDebug(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	target := e.start(pod, e.container(pod, "main", "echo target-marker >/dev/null; exec sleep 1000"))
	t.Cleanup(func() {
		_ = e.rt.Signal(context.Background(), target.ID, 9)
		e.wait(target.ID)
		e.destroy(target.ID)
		_ = e.rt.RemoveSandbox(context.Background(), pod.UID)
	})
	pr, err := e.rt.sb.Record(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	podCgroups := cgroupDirs(t, pr.CgroupsPath)
	before := map[string][]string{}
	for _, d := range podCgroups {
		before[d] = subdirs(t, d)
	}
	run := func(target string, script string) (string, int) {
		t.Helper()
		var out bytes.Buffer
		code, err := e.rt.Debug(context.Background(), pod, e.container(pod, "debugger-abcde", script), target,
			podspec.ExecSpec{Cmd: []string{"sh", "-c", script}, Stdout: &out, Stderr: &out}, nil)
		if err != nil {
			t.Fatalf("Debug: %v (output %q)", err, out.String())
		}
		return out.String(), code
	}
	out, code := run("", "ps -o args; exit 3")
	if code != 3 || strings.Contains(out, "sleep 1000") {
		t.Errorf("debug without target: exit %d, ps %q; want 3 and a PID namespace of its own", code, out)
	}
	out, code = run(target.ID, "ps -o args")
	if code != 0 || !strings.Contains(out, "sleep 1000") {
		t.Errorf("debug with target: exit %d, ps %q; want the target's sleep", code, out)
	}
	_, err = e.rt.Debug(context.Background(), pod, &podspec.Container{Name: "d", Image: "nope"}, "", podspec.ExecSpec{Cmd: []string{"true"}}, nil)
	if !errors.Is(err, podspec.ErrImageNotPresent) {
		t.Errorf("debug with a missing image: %v, want ErrImageNotPresent", err)
	}
	exited := e.start(pod, e.container(pod, "exited", "true"))
	e.wait(exited.ID)
	if _, err := e.rt.Debug(context.Background(), pod, e.container(pod, "d", "true"), exited.ID, podspec.ExecSpec{Cmd: []string{"true"}}, nil); !errors.Is(err, podspec.ErrNotRunning) {
		t.Errorf("debug with an exited target: %v, want ErrNotRunning", err)
	}
	e.destroy(exited.ID)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.rt.Debug(ctx, pod, e.container(pod, "d", "true"), "", podspec.ExecSpec{Cmd: []string{"true"}}, nil); err == nil {
		t.Error("debug under an ended context ran")
	}

	assertNoDebugLeft(t, e, target.ID)
	for _, d := range podCgroups {
		if got := subdirs(t, d); strings.Join(got, ",") != strings.Join(before[d], ",") {
			t.Errorf("pod cgroup %s holds %v after the debug containers, want %v", d, got, before[d])
		}
	}
}

// Recover removes what a daemon that died left of a debug container, even
// one cut short after its spec and cgroup and before its libcontainer
// state.
func TestDebugLeftoverRemoved(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(true)
	e.sandbox(pod)
	t.Cleanup(func() { _ = e.rt.RemoveSandbox(context.Background(), pod.UID) })
	pr, err := e.rt.sb.Record(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	id := newID()
	cgPath := containerCgroupsPath(pr.CgroupsPath, id)
	dir := filepath.Join(e.cfg.RunDir, debugDir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(dir, specFile), specs.Spec{Linux: &specs.Linux{CgroupsPath: cgPath}}); err != nil {
		t.Fatal(err)
	}
	cgs := cgroupDirs(t, cgPath)
	for _, d := range cgs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.store.Prepare(id, testImage); err != nil {
		t.Fatal(err)
	}
	e.rt.Close()
	e.rt = e.newRuntime() // Recover
	assertNoDebugLeft(t, e)
	for _, d := range cgs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s of the debug container left: %v", d, err)
		}
	}
}

// assertNoDebugLeft checks that no debug container has a state dir, and
// that libcontainer state and snapshots are those of the containers keep.
func assertNoDebugLeft(t *testing.T, e *env, keep ...string) {
	t.Helper()
	want := strings.Join(keep, ",")
	if got := dirNames(t, filepath.Join(e.cfg.RunDir, debugDir)); len(got) > 0 {
		t.Errorf("debug state dirs %v left", got)
	}
	if got := dirNames(t, e.rt.libcontainerRoot()); strings.Join(got, ",") != want {
		t.Errorf("libcontainer state %v, want %v", got, keep)
	}
	if got, _ := e.store.Snapshots(); strings.Join(got, ",") != want {
		t.Errorf("snapshots %v, want %v", got, keep)
	}
}

// dirNames are the names in dir; none if it does not exist.
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
	return names
}

func subdirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}
