package mirror

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"

	"github.com/staticpodd/staticpodd/agent/status"
)

// nodeLocalPod is a static pod that uses ConfigMaps and Secrets of the
// node's manifests in every way a pod can.
func nodeLocalPod() *v1.Pod {
	yes := true
	p := staticPod("h1", v1.PodRunning)
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	p.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}, Items: []v1.KeyToPath{{Key: "a", Path: "a.conf"}}}}},
		{Name: "tls", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "serving", Optional: &yes}}},
		{Name: "bundle", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "ca"}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "sa-key"}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
		}}}},
		{Name: "podinfo", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
		}}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox",
		EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "db"}}}}}}
	p.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "PLAIN", Value: "x"},
		{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}, Key: "level"}}},
		{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "token", Optional: &yes}}},
		{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
	}
	p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-env"}}, Prefix: "APP_"},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "config", MountPath: "/etc/app"}, {Name: "tls", MountPath: "/tls"}, {Name: "bundle", MountPath: "/bundle"},
	}
	return p
}

const nodeLocalAnnotation = `volume config: configMap app-config
volume tls: secret serving (optional)
volume bundle: projected configMap ca, secret sa-key, downwardAPI
envFrom init: secret db
env c LEVEL: configMap app-config key level
env c TOKEN: secret db key token (optional)
envFrom c: configMap app-env prefix APP_
imagePullSecrets: secret regcred`

// The mirror pod of a static pod using node-local ConfigMaps and Secrets
// names none of them, so that the API server takes it; its annotation says
// what was left out; the static pod keeps them; and the mirror pod is
// current: made once, never deleted, through status changes and resyncs.
func TestMirrorPodWithoutNodeLocalObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		var creates, deletes atomic.Int32
		client.PrependReactor("*", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
			switch a.GetVerb() {
			case "create":
				creates.Add(1)
			case "delete":
				deletes.Add(1)
			}
			return false, nil, nil
		})
		pods := newFakePods()
		static := nodeLocalPod()
		pods.set("kube-system/web-node1", static)
		start(t, client, pods)
		eventually(t, "the mirror pod with its status", func() bool {
			p := getMirror(client)
			return p != nil && p.Status.Phase == v1.PodRunning
		})
		mp := getMirror(client)

		if got := mp.Annotations[AnnotationNodeLocalObjects]; got != nodeLocalAnnotation {
			t.Errorf("annotation %s:\n%s\nwant:\n%s", AnnotationNodeLocalObjects, got, nodeLocalAnnotation)
		}
		want := nodeLocalPod().Spec
		want.ImagePullSecrets = nil
		want.Volumes[0].VolumeSource = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}
		want.Volumes[1].VolumeSource = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}
		want.Volumes[2].VolumeSource = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}
		want.InitContainers[0].EnvFrom = nil
		c := &want.Containers[0]
		c.Env = []v1.EnvVar{c.Env[0], c.Env[3]}
		c.EnvFrom = nil
		if !equality.Semantic.DeepEqual(mp.Spec, want) {
			t.Errorf("mirror pod spec:\n%+v\nwant:\n%+v", mp.Spec, want)
		}
		if !equality.Semantic.DeepEqual(pods.Desired("kube-system/web-node1").Copy().Spec, nodeLocalPod().Spec) {
			t.Error("making the mirror pod changed the static pod's spec")
		}

		// Status changes and the periodic full passes do not make it again.
		for i := range 3 {
			next := nodeLocalPod()
			next.Status.Message = fmt.Sprint("status ", i)
			pods.set("kube-system/web-node1", next)
			eventually(t, "the new status", func() bool {
				p := getMirror(client)
				return p != nil && p.Status.Message == next.Status.Message
			})
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if p := getMirror(client); p == nil || p.UID != mp.UID {
			t.Errorf("mirror pod replaced: %v", p)
		}
		if creates.Load() != 1 || deletes.Load() != 0 {
			t.Errorf("%d creates, %d deletes of pods; want 1 and 0", creates.Load(), deletes.Load())
		}
	})
}

// A static pod that uses no node-local object has a mirror pod as before:
// its spec unchanged (a projected volume of downwardAPI alone is the API
// server's to take), and no annotation of that name, even one the manifest
// wrote, since staticpodd.io/ is staticpodd's.
func TestMirrorPodOfPodWithoutNodeLocalObjects(t *testing.T) {
	p := staticPod("h1", v1.PodRunning)
	p.Annotations[AnnotationNodeLocalObjects] = "volume x: secret forged"
	p.Spec.Volumes = nodeLocalPod().Spec.Volumes[3:]
	mp := mirrorPod(status.Share(p), "node1", "uid")
	if !equality.Semantic.DeepEqual(mp.Spec, p.Spec) {
		t.Errorf("mirror pod spec:\n%+v\nwant the static pod's:\n%+v", mp.Spec, p.Spec)
	}
	if v, ok := mp.Annotations[AnnotationNodeLocalObjects]; ok {
		t.Errorf("annotation %s = %q on a pod without node-local objects", AnnotationNodeLocalObjects, v)
	}

	p = nodeLocalPod()
	p.Annotations[AnnotationNodeLocalObjects] = "volume x: secret forged"
	if got := mirrorPod(status.Share(p), "node1", "uid").Annotations[AnnotationNodeLocalObjects]; got != nodeLocalAnnotation {
		t.Errorf("annotation %s:\n%s\nwant:\n%s", AnnotationNodeLocalObjects, got, nodeLocalAnnotation)
	}
}

// A manifest's names cannot forge a line or a field of the annotation (an
// environment variable's name may hold any printable character but '='),
// and many references do not make it unbounded.
func TestNodeLocalAnnotationHostileAndBounded(t *testing.T) {
	p := staticPod("h1", v1.PodRunning)
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A: configMap x\nimagePullSecrets: secret y", ValueFrom: &v1.EnvVarSource{
		SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}}}}
	got := mirrorPod(status.Share(p), "node1", "uid").Annotations[AnnotationNodeLocalObjects]
	if want := `env c "A: configMap x\nimagePullSecrets: secret y": secret s key k`; got != want {
		t.Errorf("annotation %q, want %q", got, want)
	}

	const n = 2000
	p.Spec.Containers[0].Env = nil
	for i := range n {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, v1.EnvVar{Name: fmt.Sprintf("VAR_%d_%s", i, strings.Repeat("x", 40)),
			ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}}})
	}
	mp := mirrorPod(status.Share(p), "node1", "uid")
	got = mp.Annotations[AnnotationNodeLocalObjects]
	if len(got) > maxNodeLocalAnnotation {
		t.Errorf("annotation of %d bytes, over %d", len(got), maxNodeLocalAnnotation)
	}
	lines := strings.Split(got, "\n")
	var more int
	if _, err := fmt.Sscanf(lines[len(lines)-1], "and %d more", &more); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if len(lines)-1+more != n {
		t.Errorf("%d lines and %d more, want %d in all", len(lines)-1, more, n)
	}
	if len(mp.Spec.Containers[0].Env) != 0 {
		t.Errorf("%d variables from a Secret left in the mirror pod", len(mp.Spec.Containers[0].Env))
	}
}
