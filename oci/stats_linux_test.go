//go:build linux && cgo

package oci

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/oci/stats"
)

// TestStats measures a real container: 30 MiB in the pod's /dev/shm (shmem,
// which the working set counts), four processes, and its log.
func TestStats(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Join(e.cfg.RootDir, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	pod := e.pod(false)
	e.sandbox(pod)
	c := e.container(pod, "fill", "head -c 31457280 /dev/zero > /dev/shm/fill; sleep 1000 & sleep 1000 & sleep 1000 & echo ready; wait")
	st := e.start(pod, c)
	waitLog(t, c.LogPath, "stdout F ready")

	sum, err := e.rt.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, ps := range sum.Pods {
		if ps.UID != pod.UID {
			continue
		}
		found = true
		if ps.Name != pod.Name || len(ps.Containers) != 1 {
			t.Fatalf("pod stats %+v, want %s with one container", ps, pod.Name)
		}
		cs := ps.Containers[0]
		t.Logf("pod %+v container %+v", ps.Usage, cs)
		if cs.ID != st.ID || cs.Name != "fill" {
			t.Errorf("container stats of %s/%s, want %s/fill", cs.ID, cs.Name, st.ID)
		}
		// The pod's cgroup and the container's are read one after the
		// other, and what runs between moves them by a few pages: the
		// pod's may be below the container's by that much, not more.
		const slack = 1 << 20
		if cs.MemoryWorkingSet < 30<<20 || ps.MemoryWorkingSet+slack < cs.MemoryWorkingSet {
			t.Errorf("working set: container %d pod %d, want at least 30 MiB, the pod's at least the container's (less 1 MiB)",
				cs.MemoryWorkingSet, ps.MemoryWorkingSet)
		}
		if cs.MemoryUsage < cs.MemoryWorkingSet {
			t.Errorf("usage %d below working set %d", cs.MemoryUsage, cs.MemoryWorkingSet)
		}
		if cs.Pids != 4 || ps.Pids != 4 {
			t.Errorf("pids: container %d pod %d, want 4 (sh and three sleeps)", cs.Pids, ps.Pids)
		}
		if cs.CPUUsageNanos == 0 {
			t.Error("no CPU time")
		}
		if cs.LogsBytes == 0 {
			t.Error("no log bytes")
		}
	}
	if !found {
		t.Fatalf("pod %s not in stats %+v", pod.UID, sum.Pods)
	}
	n := sum.Node
	if n.MemoryCapacity == 0 || n.MemoryWorkingSet == 0 || n.MemoryWorkingSet > n.MemoryCapacity {
		t.Errorf("node memory: capacity %d working set %d", n.MemoryCapacity, n.MemoryWorkingSet)
	}
	if n.MaxPID == 0 || n.NumPIDs == 0 || n.NodeFs.CapacityBytes == 0 || n.ImageFs.Inodes == 0 {
		t.Errorf("node stats %+v", n)
	}
	if err := e.rt.Signal(context.Background(), st.ID, 9); err != nil {
		t.Fatal(err)
	}
	e.destroy(e.wait(st.ID).ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryNotifier arms a threshold 10 MiB above the node's memory usage
// (the node being the pods' parent cgroup here) and makes a container cross
// it: the notifier fires without any poll.
func TestMemoryNotifier(t *testing.T) {
	e := newEnv(t)
	e.cfg.NodeCgroup = e.cfg.CgroupRoot
	e.rt = e.newRuntime()
	pod := e.pod(false)
	e.sandbox(pod)
	n, err := e.rt.NewMemoryNotifier()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	d := stats.DirsOf(e.cfg.NodeCgroup)
	u, err := stats.ReadUsage(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.SetThreshold(u.MemoryUsage + 10<<20); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Events():
		if !d.Unified() {
			t.Fatal("notified before anything crossed the threshold")
		}
	default:
	}
	c := e.container(pod, "fill", "head -c 31457280 /dev/zero > /dev/shm/fill; echo ready; sleep 1000")
	st := e.start(pod, c)
	select {
	case <-n.Events():
	case <-time.After(20 * time.Second):
		t.Fatal("no notification after 30 MiB more")
	}
	waitLog(t, c.LogPath, "stdout F ready")
	if err := e.rt.Signal(context.Background(), st.ID, 9); err != nil {
		t.Fatal(err)
	}
	e.destroy(e.wait(st.ID).ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

// The v2 notifier's PSI trigger is one the kernel takes from this process
// (no CAP_SYS_RESOURCE here): on /proc/pressure/memory, where the kernel
// has PSI.
func TestPSITriggerAccepted(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/memory"); err != nil {
		t.Skip("no PSI in this kernel: /proc/pressure/memory is missing")
	}
	f, err := armPSI("/proc/pressure/memory")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
