//go:build linux && cgo

package oci

import (
	"context"
	"slices"
	"testing"
	"time"
)

// aheadOf waits for pod uid's ahead and returns its monitor's ID (the key
// of the snapshot it prepared) and the monitor; "" if it has none.
func aheadOf(t *testing.T, rt *Runtime, uid string) (string, *pendingMonitor) {
	t.Helper()
	rt.mu.Lock()
	a := rt.aheads[uid]
	rt.mu.Unlock()
	if a == nil {
		return "", nil
	}
	<-a.done
	if a.err != nil || a.pm == nil {
		return "", nil
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

// What was prepared with a sandbox and is not taken goes: with the sandbox
// removed before any container started, with a first container of another
// image, and when the image could not be prepared (one to pull first). Its
// monitor exits and its snapshot is released; nothing else is left.
func TestAheadNotTakenLeavesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	gone := func(what, key string, pm *pendingMonitor) {
		t.Helper()
		poll(t, 10*time.Second, what+": the prepared monitor exits", pm.m.exited)
		if keys, err := e.store.Snapshots(); err != nil || slices.Contains(keys, key) {
			t.Errorf("%s: snapshots %v (%v) keep the prepared %s", what, keys, err, key)
		}
	}

	removed := e.pod(true)
	removed.FirstImage = testImage
	e.sandbox(removed)
	key, pm := aheadOf(t, e.rt, removed.UID)
	if key == "" {
		t.Fatal("nothing prepared while the sandbox was made")
	}
	if err := e.rt.RemoveSandbox(ctx, removed.UID); err != nil {
		t.Fatal(err)
	}
	gone("sandbox removed", key, pm)

	other := e.pod(true)
	other.FirstImage = testImage
	e.sandbox(other)
	key, pm = aheadOf(t, e.rt, other.UID)
	c := e.container(other, "main", "true")
	c.ImageID = "sha256:another" // made sure of by the agent as another image
	if _, err := e.rt.StartContainer(ctx, other, c); err == nil {
		t.Error("a container of an image the store lacks started")
	}
	gone("another image", key, pm)

	missing := e.pod(true)
	missing.FirstImage = "docker.io/library/missing:v1"
	e.sandbox(missing)
	if key, _ := aheadOf(t, e.rt, missing.UID); key != "" {
		t.Errorf("snapshot %s of an image the store lacks kept", key)
	}
	st := e.start(missing, e.container(missing, "main", "true"))
	e.wait(st.ID)
	e.destroy(st.ID)
	for _, p := range []string{other.UID, missing.UID} {
		if err := e.rt.RemoveSandbox(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if keys, err := e.store.Snapshots(); err != nil || len(keys) != 0 {
		t.Errorf("snapshots %v (%v) left, want none", keys, err)
	}
}
