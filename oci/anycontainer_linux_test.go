//go:build linux && cgo

package oci

import (
	"context"
	"strings"
	"testing"
)

// A sandbox is removed only once its own containers are: a container of
// the pod, even one exited, makes RemoveSandbox fail naming it, whether
// this runtime made it or an earlier one did; another pod's containers do
// not matter.
func TestRemoveSandboxWaitsForItsOwnContainersOnly(t *testing.T) {
	e := newEnv(t)
	a, b := e.pod(true), e.pod(true)
	e.sandbox(a)
	e.sandbox(b)
	ca := e.start(a, e.container(a, "c", "exit 0"))
	cb := e.start(b, e.container(b, "c", "exit 0"))
	e.wait(ca.ID)
	e.wait(cb.ID)
	t.Cleanup(func() { // a failure half-way leaves no mount behind
		for _, id := range []string{ca.ID, cb.ID} {
			_ = e.rt.Destroy(context.Background(), id)
		}
		for _, uid := range []string{a.UID, b.UID} {
			_ = e.rt.RemoveSandbox(context.Background(), uid)
		}
	})

	if err := e.rt.RemoveSandbox(t.Context(), a.UID); err == nil || !strings.Contains(err.Error(), ca.ID) {
		t.Fatalf("RemoveSandbox with its container left = %v, want an error naming %s", err, ca.ID)
	}
	e.destroy(cb.ID)
	if err := e.rt.RemoveSandbox(t.Context(), b.UID); err != nil {
		t.Fatalf("RemoveSandbox beside another pod's container: %v", err)
	}

	// A daemon started again knows nothing of the containers but their records.
	e.rt = e.newRuntime()
	if err := e.rt.RemoveSandbox(t.Context(), a.UID); err == nil || !strings.Contains(err.Error(), ca.ID) {
		t.Fatalf("RemoveSandbox after a restart with its container left = %v, want an error naming %s", err, ca.ID)
	}
	e.destroy(ca.ID)
	if err := e.rt.RemoveSandbox(t.Context(), a.UID); err != nil {
		t.Fatal(err)
	}
	e.sandboxGone(a.UID, "removed")
}
