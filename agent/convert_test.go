package agent

import (
	"io"
	"log/slog"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
)

// The agent with the real manifest conversion: emptyDirs are made before the
// containers start and removed with the pod.
func TestRealConversion(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir(), PodLogsDir: t.TempDir()}
	rt := newFakeRuntime()
	a := New(Config{NodeName: testNode, Paths: paths}, rt, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox", "sleep", "1d"))
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}

	w := newWorker(a, "default/web-node1", map[string]*podState{})
	w.update(p.Pod, 1)
	w.sync(t.Context())
	if got := rt.Calls("start"); len(got) != 1 {
		t.Fatalf("starts = %q; pod status %+v", got, w.a.statuses.Desired(w.key).Status)
	}
	if _, err := os.Stat(poddir.Root(paths.RootDir).EmptyDir("u1", "data")); err != nil {
		t.Errorf("emptyDir not made before start: %v", err)
	}
	if h := w.pods["u1"].containers[0].Hash; h == "" {
		t.Error("started container has no hash: adoption could not match it")
	}

	w.update(nil, 2)
	w.sync(t.Context())
	if _, err := os.Stat(poddir.Root(paths.RootDir).Pod("u1")); !os.IsNotExist(err) {
		t.Errorf("pod dir after removal: %v, want gone", err)
	}
}
