package agent

import (
	"slices"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/source"
)

// A pod whose ConfigMap is missing waits as under the kubelet, and starts
// as soon as a source brings the ConfigMap: for env, its container waits
// CreateContainerConfigError with the kubelet's message; for a volume, it
// waits ContainerCreating after a FailedMount event.
func TestPodWaitsForItsConfigMap(t *testing.T) {
	env := ctr("env", "busybox")
	env.Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "x"}}}}
	vol := ctr("vol", "busybox")
	vol.VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/cfg"}}
	for _, tc := range []struct {
		name           string
		pod            manifest.Pod
		reason, msg    string
		failedMountMsg string
	}{
		{"env", testPod("web", "u1", v1.RestartPolicyAlways, env), "CreateContainerConfigError", `configmap "cfg" not found`, ""},
		{"volume", func() manifest.Pod {
			p := testPod("web", "u1", v1.RestartPolicyAlways, vol)
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}
			return p
		}(), "ContainerCreating", "", `MountVolume.SetUp failed for volume "v" : configmap "cfg" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				h := start(t, rt, Config{})
				h.a.conv = manifestConverter{paths: manifest.Paths{RootDir: t.TempDir(), PodLogsDir: t.TempDir()}, objects: &h.a.objects}
				h.send([]manifest.Pod{tc.pod})
				cs := h.pod("web").Status.ContainerStatuses[0]
				if w := cs.State.Waiting; w == nil || w.Reason != tc.reason || (tc.msg != "" && w.Message != tc.msg) {
					t.Fatalf("state = %+v, want waiting %s %q", cs.State, tc.reason, tc.msg)
				}
				if tc.failedMountMsg != "" && !slices.ContainsFunc(h.a.Events().List(), func(e v1.Event) bool {
					return e.Reason == events.FailedMount && e.Message == tc.failedMountMsg && e.Type == v1.EventTypeWarning
				}) {
					t.Errorf("no FailedMount event %q in %+v", tc.failedMountMsg, h.a.Events().List())
				}
				if got := rt.Calls("start"); len(got) != 0 {
					t.Fatalf("started %q without its ConfigMap", got)
				}
				cm := &objects.Object{Source: manifest.SourceFile, Origin: "/etc/kubernetes/manifests/cfg.yaml",
					ConfigMap: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"x": "1"}}}
				h.updates <- source.Update{Source: manifest.SourceFile, Pods: []manifest.Pod{tc.pod}, Objects: []*objects.Object{cm}}
				synctest.Wait()
				if got := rt.Calls("start"); len(got) != 1 {
					t.Fatalf("starts = %q once the ConfigMap came, want one; %s", got, h.logs)
				}
				if cs := h.pod("web").Status.ContainerStatuses[0]; cs.State.Running == nil {
					t.Fatalf("state = %+v, want running", cs.State)
				}
			})
		})
	}
}
