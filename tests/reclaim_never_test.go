package tests

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// A restartPolicy Never pod that completed runs once per UID, even after
// node-level reclaim removed its dead container and the daemon was killed
// (kill -9, nothing said on the way out): the next daemon, finding no
// container of the pod, must not take it for one never started.
func TestReclaimedNeverPodNotRerunAfterKill9(t *testing.T) {
	t.Parallel()
	mnt := filepath.Join(t.TempDir(), "disk")
	testroot.LoopFS(t, mnt, 160<<20)
	d := newDaemon(t)
	d.RootDir = filepath.Join(mnt, "root")
	b, _ := os.ReadFile(d.Config)
	os.WriteFile(d.Config, append(b, []byte(`evictionHard:
  nodefs.available: 40Mi
evictionMinimumReclaim:
  nodefs.available: 5Mi
evictionPressureTransitionPeriod: 5s
`)...), 0o644)
	marks := filepath.Join(d.Dir, "marks")
	os.MkdirAll(marks, 0o755)
	d.Start()
	d.WriteManifest("done.yaml", `apiVersion: v1
kind: Pod
metadata: {name: done}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo start >> /s/marks && head -c 16777216 /dev/zero > /tmp/layer && sync"]
    volumeMounts: [{name: s, mountPath: /s}]
  volumes:
  - {name: s, hostPath: {path: `+marks+`}}
`)
	d.Eventually(60*time.Second, "done succeeded", func() error {
		if p := d.Pod("done"); p == nil || p.Status.Phase != v1.PodSucceeded {
			return errors.New("not yet")
		}
		return nil
	})
	uid := d.Pod("done").UID

	fill(t, filepath.Join(mnt, "fill"), available(t, mnt)-30<<20)
	d.Eventually(60*time.Second, "the dead container reclaimed", func() error {
		if ents, _ := os.ReadDir(filepath.Join(d.RootDir, "images", "snapshots")); len(ents) != 0 {
			return errors.New("its snapshot is still there")
		}
		return nil
	})
	os.Remove(filepath.Join(mnt, "fill"))

	d.Kill9()
	d.Start()
	d.WaitLine(60*time.Second, "pods synced: ready") // the next daemon ready
	d.Eventually(60*time.Second, "done listed Succeeded by the next daemon", func() error {
		p := d.Pod("done")
		if p == nil || p.Status.Phase != v1.PodSucceeded {
			return errors.New("not yet")
		}
		return nil
	})
	p := d.Pod("done")
	if p.UID != uid {
		t.Fatalf("UID %s, was %s", p.UID, uid)
	}
	got, _ := os.ReadFile(filepath.Join(marks, "marks"))
	if n := strings.Count(string(got), "start\n"); n != 1 {
		t.Errorf("the Never pod ran %d times in UID %s, want once", n, uid)
	}
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 || cs[0].RestartCount != 0 {
		t.Errorf("after the restart: %+v, want its completed run", cs)
	}
}
