package describe

import (
	"bytes"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func waitingPod(reason, message string) v1.Pod {
	p := v1.Pod{}
	p.Namespace, p.Name, p.UID = "kube-system", "api-node1", "u1"
	p.Spec.Volumes = []v1.Volume{
		{Name: "certs", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "api-certs"}}},
		{Name: "all", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "key"}}}}}}},
	}
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "api", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	return p
}

func podEvent(p v1.Pod, reason, message string, at time.Time) v1.Event {
	return v1.Event{Reason: reason, Message: message, LastTimestamp: metav1.NewTime(at),
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
}

// What a waiting pod needs is said from the kubelet's messages: the
// container's CreateContainerConfigError, the latest FailedMount while no
// container was created (by name, else by the volume's sources), the
// missing pull secrets while a pull fails; nothing once the pod is past it.
func TestObjectWaits(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		name            string
		reason, message string
		events          []v1.Event
		two             bool // a second container in the same state
		want            string
	}{
		{name: "env secret", reason: "CreateContainerConfigError", message: `secret "db" not found`,
			want: `api: secret kube-system/db (CreateContainerConfigError: secret "db" not found)`},
		{name: "env key", reason: "CreateContainerConfigError", message: "couldn't find key password in Secret kube-system/db",
			want: "api: secret kube-system/db (CreateContainerConfigError: couldn't find key password in Secret kube-system/db)"},
		{name: "other config error", reason: "CreateContainerConfigError", message: "container has runAsNonRoot and image will run as root"},
		{name: "mount in the status, said once", reason: "ContainerCreating", two: true,
			message: `prepare volumes of pod u1: MountVolume.SetUp failed for volume "certs" : secret "api-certs" not found`,
			events:  []v1.Event{podEvent(waitingPod("", ""), "FailedMount", `MountVolume.SetUp failed for volume "certs" : secret "api-certs" not found`, t0)},
			want:    `secret kube-system/api-certs (ContainerCreating: MountVolume.SetUp failed for volume "certs" : secret "api-certs" not found)`},
		{name: "mount, newest event", reason: "ContainerCreating", events: []v1.Event{
			podEvent(waitingPod("", ""), "FailedMount", `MountVolume.SetUp failed for volume "certs" : secret "api-certs" not found`, t0.Add(time.Second)),
			podEvent(waitingPod("", ""), "FailedMount", `MountVolume.SetUp failed for volume "all" : configmap "old" not found`, t0),
		}, want: `secret kube-system/api-certs (FailedMount: MountVolume.SetUp failed for volume "certs" : secret "api-certs" not found)`},
		{name: "mount of a missing key: the volume's objects", reason: "ContainerCreating", events: []v1.Event{
			podEvent(waitingPod("", ""), "FailedMount", `MountVolume.SetUp failed for volume "all" : configmap references non-existent config key: k`, t0),
		}, want: `configmap kube-system/cfg, secret kube-system/key (FailedMount: MountVolume.SetUp failed for volume "all" : configmap references non-existent config key: k)`},
		{name: "mount done, pulling now", reason: "ContainerCreating", message: `Pulling image "x"`, events: []v1.Event{
			podEvent(waitingPod("", ""), "FailedMount", `MountVolume.SetUp failed for volume "certs" : secret "api-certs" not found`, t0),
		}},
		{name: "another pod's event", reason: "ContainerCreating", events: []v1.Event{
			podEvent(v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "api-node1", UID: "old"}}, "FailedMount", `MountVolume.SetUp failed for volume "certs" : secret "api-certs" not found`, t0),
		}},
		{name: "pull secrets", reason: "ImagePullBackOff", events: []v1.Event{
			podEvent(waitingPod("", ""), "FailedToRetrieveImagePullSecret", "Unable to retrieve some image pull secrets (regcred, other); attempting to pull the image may not succeed.", t0),
		}, want: "secret kube-system/regcred, secret kube-system/other (FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (regcred, other); attempting to pull the image may not succeed.)"},
		{name: "pull secrets, running now", reason: "", events: []v1.Event{
			podEvent(waitingPod("", ""), "FailedToRetrieveImagePullSecret", "Unable to retrieve some image pull secrets (regcred); attempting to pull the image may not succeed.", t0),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := waitingPod(tc.reason, tc.message)
			if tc.reason == "" {
				p.Status.ContainerStatuses[0].State = v1.ContainerState{Running: &v1.ContainerStateRunning{}}
			}
			if tc.two {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, p.Status.ContainerStatuses[0])
				p.Status.ContainerStatuses[1].Name = "sidecar"
			}
			var got []string
			for _, w := range ObjectWaits(p, tc.events) {
				got = append(got, w.String())
			}
			if strings.Join(got, "\n") != tc.want {
				t.Errorf("waits:\n%s\nwant:\n%s", strings.Join(got, "\n"), tc.want)
			}
		})
	}
}

// A hostile message (control characters, many names, a long text) is
// escaped and bounded, on one line.
func TestObjectWaitsHostile(t *testing.T) {
	msg := strings.Repeat(`secret "a`+"\x1b[2J"+`" not found, `, 3)
	for i := range 50 {
		msg += `configmap "c` + strings.Repeat("x", i) + `" not found, `
	}
	p := waitingPod("CreateContainerConfigError", msg+strings.Repeat("y", 1<<20))
	var b bytes.Buffer
	PrintObjectWaits(&b, []v1.Pod{p}, nil)
	out := b.String()
	if strings.ContainsRune(out, '\x1b') || strings.Count(out, "\n") != 3 || len(out) > 1500 || !strings.Contains(out, "and 46 more") {
		t.Errorf("hostile message shown as (%d bytes):\n%q", len(out), out)
	}
}
