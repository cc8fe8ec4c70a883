//go:build linux && cgo

package sandbox

import "testing"

func TestPodLocksDoNotAccumulate(t *testing.T) {
	e := newEnv(t)
	for range 5 {
		pod := e.pod(true)
		e.sandbox(pod)
		if err := e.remove(pod.UID); err != nil {
			t.Fatal(err)
		}
	}
	e.m.mu.Lock()
	n := len(e.m.locks)
	e.m.mu.Unlock()
	if n != 0 {
		t.Errorf("%d pod locks kept after every sandbox was removed", n)
	}
}
