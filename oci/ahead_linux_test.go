//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// aheadOf waits for pod uid's ahead and returns the key of the snapshot it
// prepared ("" if it prepared none) and its monitor (nil if it had none).
func aheadOf(t *testing.T, rt *Runtime, uid string) (string, *pendingMonitor) {
	t.Helper()
	rt.mu.Lock()
	a := rt.aheads[uid]
	rt.mu.Unlock()
	if a == nil {
		return "", nil
	}
	<-a.done
	if a.err != nil {
		return "", a.pm
	}
	return a.pm.id, a.pm
}

// The first container of a pod made with FirstImage runs with the monitor
// and the snapshot prepared while its sandbox was made: its ID is their
// key, and no other snapshot is made for it.
func TestFirstContainerPreparedWithItsSandbox(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(true)
	pod.FirstImage = testImage
	e.sandbox(pod)
	key, _ := aheadOf(t, e.rt, pod.UID)
	if key == "" {
		t.Fatal("nothing prepared while the sandbox was made")
	}
	st := e.start(pod, e.container(pod, "main", "true"))
	if st.ID != key {
		t.Errorf("container %s started, want the one prepared with the sandbox, %s", st.ID, key)
	}
	if keys, err := e.store.Snapshots(); err != nil || !slices.Equal(keys, []string{key}) {
		t.Errorf("snapshots %v (%v), want the prepared one alone", keys, err)
	}
	e.wait(st.ID)
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

// What was prepared with a sandbox and is not taken goes, its monitor
// exited and its snapshot released: with the sandbox removed before any
// container started; with a first container of another image (whose start
// prepares its own, and fails here, the image missing, rather than run on
// the prepared one); with an image the store lacks at the start; with a
// monitor that died meanwhile; with a sandbox that failed; when the image
// could not be prepared (one to pull first); and at the runtime's Close.
func TestAheadNotTakenLeavesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	made := func(what string, pod *podspec.Pod) (string, *pendingMonitor) {
		t.Helper()
		pod.FirstImage = testImage
		e.sandbox(pod)
		key, pm := aheadOf(t, e.rt, pod.UID)
		if key == "" {
			t.Fatalf("%s: nothing prepared while the sandbox was made", what)
		}
		return key, pm
	}
	gone := func(what, key string, pm *pendingMonitor) {
		t.Helper()
		poll(t, 10*time.Second, what+": the prepared monitor exits", pm.m.exited)
		if keys, err := e.store.Snapshots(); err != nil || slices.Contains(keys, key) {
			t.Errorf("%s: snapshots %v (%v) keep the prepared %s", what, keys, err, key)
		}
	}

	removed := e.pod(true)
	key, pm := made("sandbox removed", removed)
	if err := e.rt.RemoveSandbox(ctx, removed.UID); err != nil {
		t.Fatal(err)
	}
	gone("sandbox removed", key, pm)

	other := e.pod(true)
	key, pm = made("another image", other)
	c := e.container(other, "main", "true")
	c.ImageID = "sha256:another" // made sure of by the agent as another image
	if _, err := e.rt.StartContainer(ctx, other, c); !errors.Is(err, podspec.ErrImageNotPresent) {
		t.Errorf("a container of another image: %v, want its own image not present (not the prepared snapshot's)", err)
	}
	gone("another image", key, pm)

	lacking := e.pod(true)
	key, pm = made("image gone at the start", lacking)
	c = e.container(lacking, "main", "true")
	c.Image = "docker.io/library/gone:v1"
	if _, err := e.rt.StartContainer(ctx, lacking, c); !errors.Is(err, podspec.ErrImageNotPresent) {
		t.Errorf("a container of an image the store lacks: %v, want ErrImageNotPresent", err)
	}
	gone("image gone at the start", key, pm)

	died := e.pod(true)
	key, pm = made("monitor died", died)
	if err := pm.proc.Kill(); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "the prepared monitor killed", pm.m.exited)
	st := e.start(died, e.container(died, "main", "true"))
	if st.ID == key {
		t.Errorf("container %s started with the monitor that died", st.ID)
	}
	gone("monitor died", key, pm)
	e.wait(st.ID)
	e.destroy(st.ID)

	failed := e.pod(false)
	failed.Hostname = strings.Repeat("h", 65) // the kernel refuses it
	failed.FirstImage = testImage
	if err := e.rt.CreateSandbox(ctx, failed); err == nil {
		t.Fatal("a sandbox with a hostname the kernel refuses made")
	}
	e.rt.mu.Lock()
	left := e.rt.aheads[failed.UID]
	e.rt.mu.Unlock()
	if left != nil {
		t.Error("what was prepared with a failed sandbox is kept")
	}

	missing := e.pod(true)
	missing.FirstImage = "docker.io/library/missing:v1"
	e.sandbox(missing)
	key, pm = aheadOf(t, e.rt, missing.UID)
	if key != "" {
		t.Errorf("snapshot %s of an image the store lacks kept", key)
	}
	if pm != nil {
		poll(t, 10*time.Second, "the monitor of an image that could not be prepared exits", pm.m.exited)
	}
	st = e.start(missing, e.container(missing, "main", "true"))
	e.wait(st.ID)
	e.destroy(st.ID)

	for _, p := range []string{other.UID, lacking.UID, died.UID, missing.UID} {
		if err := e.rt.RemoveSandbox(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if keys, err := e.store.Snapshots(); err != nil || len(keys) != 0 {
		t.Errorf("snapshots %v (%v) left, want none", keys, err)
	}

	closed := e.pod(true)
	key, pm = made("runtime closed", closed)
	if err := e.rt.Close(); err != nil {
		t.Fatal(err)
	}
	gone("runtime closed", key, pm)
	e.rt = e.newRuntime() // the sandbox stays for the next daemon
	if err := e.rt.RemoveSandbox(ctx, closed.UID); err != nil {
		t.Fatal(err)
	}
}
