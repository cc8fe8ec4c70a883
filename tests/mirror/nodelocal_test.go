//go:build controlplane

package mirror

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/mirror"
	"github.com/staticpodd/staticpodd/agent/status"
	"github.com/staticpodd/staticpodd/tests/kubeapi"
)

// onePod is the agent's side for the mirror client: one static pod, whose
// status the test changes.
type onePod struct {
	rec *events.Recorder
	ch  chan struct{}

	mu   sync.Mutex
	pods map[string]*v1.Pod
	next []string
}

func (o *onePod) Watch() mirror.Watch             { return o }
func (o *onePod) Events() *events.Recorder        { return o.rec }
func (o *onePod) C() <-chan struct{}              { return o.ch }
func (o *onePod) Close()                          {}
func (o *onePod) Synced() bool                    { return true }
func (o *onePod) Stopping(string) []status.Shared { return nil }

// Desired shares the pod set last: set is given a new pod each time.
func (o *onePod) Desired(name string) status.Shared {
	o.mu.Lock()
	defer o.mu.Unlock()
	return status.Share(o.pods[name])
}
func (o *onePod) Keys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Collect(maps.Keys(o.pods))
}
func (o *onePod) Next() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.next
	o.next = nil
	return out
}
func (o *onePod) set(p *v1.Pod) {
	o.mu.Lock()
	name := p.Namespace + "/" + p.Name
	o.pods[name] = p
	o.next = append(o.next, name)
	o.mu.Unlock()
	select {
	case o.ch <- struct{}{}:
	default:
	}
}

// nodeLocalStatic is a static pod of node using ConfigMaps and Secrets of
// its manifests in every way: a configMap, a secret and a projected volume,
// env from both, envFrom both, imagePullSecrets. message tells its statuses
// apart.
func nodeLocalStatic(node, message string) *v1.Pod {
	ref := func(name string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: name} }
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "objects-" + node, Namespace: "default", UID: "static-uid",
			Annotations: map[string]string{annotationHash: "hash1", "kubernetes.io/config.source": "file", "kubernetes.io/config.seen": "2026-01-01T00:00:00Z"}},
		Spec: v1.PodSpec{
			NodeName:         node,
			ImagePullSecrets: []v1.LocalObjectReference{ref("regcred")},
			Volumes: []v1.Volume{
				{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("app-config")}}},
				{Name: "tls", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "serving"}}},
				{Name: "bundle", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: ref("ca")}},
					{Secret: &v1.SecretProjection{LocalObjectReference: ref("sa-key")}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
				}}}},
			},
			Containers: []v1.Container{{
				Name: "main", Image: "busybox", ImagePullPolicy: v1.PullIfNotPresent,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
				Env: []v1.EnvVar{
					{Name: "PLAIN", Value: "x"},
					{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("app-config"), Key: "level"}}},
					{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("db"), Key: "token"}}},
				},
				EnvFrom: []v1.EnvFromSource{
					{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("app-env")}, Prefix: "APP_"},
					{SecretRef: &v1.SecretEnvSource{LocalObjectReference: ref("db")}},
				},
				VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "tls", MountPath: "/tls"}, {Name: "bundle", MountPath: "/bundle"}},
			}},
			RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst, SchedulerName: v1.DefaultSchedulerName,
			TerminationGracePeriodSeconds: new(int64(30)),
		},
		Status: v1.PodStatus{Phase: v1.PodRunning, Message: message, QOSClass: v1.PodQOSBestEffort},
	}
}

const wantNodeLocal = `volume config: configMap app-config
volume tls: secret serving
volume bundle: projected configMap ca, secret sa-key, downwardAPI
env main LEVEL: configMap app-config key level
env main TOKEN: secret db key token
envFrom main: configMap app-env prefix APP_
envFrom main: secret db
imagePullSecrets: secret regcred`

// A static pod that uses node-local ConfigMaps and Secrets in every way gets
// a mirror pod from the real kube-apiserver, through the node's credentials
// with the Node authorizer, NodeRestriction and the ServiceAccount plugin:
// the same pod as it is would be refused. The mirror pod is kept: one
// create and no delete through status changes and the mirror client's
// restart, and kubectl describe shows what it leaves out.
func TestMirrorPodOfNodeLocalObjects(t *testing.T) {
	c := kubeapi.Start(t)
	const node = "objects-node"
	kubeconfig := c.NodeKubeconfig(node, c.Server())
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	pods := &onePod{rec: events.New(node, 0, logger), ch: make(chan struct{}, 1), pods: map[string]*v1.Pod{}}
	pods.set(nodeLocalStatic(node, "first"))
	run := func() (stop func()) {
		m := mirror.New(mirror.Config{Credentials: mirror.NewCredentials(mirror.CredentialsConfig{Kubeconfig: kubeconfig, NodeName: node, Version: "test"}, logger),
			NodeName: node, RegisterNode: true, Version: "test"}, pods, logger)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		return func() { cancel(); <-done }
	}
	stop := run()
	defer func() { stop() }()

	ctx := context.Background()
	var mp *v1.Pod
	waitStatus := func(message string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			p, err := c.Admin.CoreV1().Pods("default").Get(ctx, "objects-"+node, metav1.GetOptions{})
			if err == nil && p.Status.Message == message {
				mp = p
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no mirror pod with status message %q: %v %+v\naudit:\n%s", message, err, p, c.Audit("default", "objects-"+node))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitStatus("first")
	uid := mp.UID

	if got := mp.Annotations[mirror.AnnotationNodeLocalObjects]; got != wantNodeLocal {
		t.Errorf("annotation %s:\n%s\nwant:\n%s", mirror.AnnotationNodeLocalObjects, got, wantNodeLocal)
	}
	if mp.Annotations[annotationMirror] != "hash1" {
		t.Errorf("mirror annotation %q, want hash1", mp.Annotations[annotationMirror])
	}
	for i, medium := range []v1.StorageMedium{v1.StorageMediumDefault, v1.StorageMediumMemory, v1.StorageMediumMemory} {
		if v := mp.Spec.Volumes[i]; v.EmptyDir == nil || v.EmptyDir.Medium != medium {
			t.Errorf("mirror pod volume %s: %+v, want an emptyDir of medium %q", v.Name, v.VolumeSource, medium)
		}
	}
	main := mp.Spec.Containers[0]
	if len(main.Env) != 1 || main.Env[0].Name != "PLAIN" || len(main.EnvFrom) != 0 || len(mp.Spec.ImagePullSecrets) != 0 || len(main.VolumeMounts) != 3 {
		t.Errorf("mirror pod's container %+v, imagePullSecrets %v: want env PLAIN alone, no envFrom, none, its three mounts", main, mp.Spec.ImagePullSecrets)
	}

	// The same pod as it is, posted as its mirror pod would be with the
	// node's credentials, is what the API server refuses.
	t.Run("refused as it is", func(t *testing.T) {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		nodeClient, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		raw := nodeLocalStatic(node, "")
		raw.Name, raw.UID = "raw-"+node, ""
		raw.Annotations[annotationMirror] = "hash1"
		raw.OwnerReferences = mp.OwnerReferences
		_, err = nodeClient.CoreV1().Pods("default").Create(ctx, raw, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "secrets") {
			t.Errorf("creating the unrewritten mirror pod: %v, want Forbidden for its secrets", err)
		}
		t.Logf("the unrewritten mirror pod: %v", err)

		// Without its secrets, NodeRestriction still refuses its ConfigMaps.
		raw.Spec.Volumes, raw.Spec.ImagePullSecrets = raw.Spec.Volumes[:1], nil
		raw.Spec.Containers[0].Env, raw.Spec.Containers[0].EnvFrom = nil, nil
		raw.Spec.Containers[0].VolumeMounts = raw.Spec.Containers[0].VolumeMounts[:1]
		_, err = nodeClient.CoreV1().Pods("default").Create(ctx, raw, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "configmaps") {
			t.Errorf("creating the unrewritten mirror pod without its secrets: %v, want Forbidden for its configmaps", err)
		}
		t.Logf("the unrewritten mirror pod without its secrets: %v", err)
	})

	// Status changes, then the mirror client made again (a daemon
	// restart), then another status: the same mirror pod throughout.
	pods.set(nodeLocalStatic(node, "second"))
	waitStatus("second")
	stop()
	stop = run()
	pods.set(nodeLocalStatic(node, "third"))
	waitStatus("third")
	if mp.UID != uid {
		t.Errorf("mirror pod made again: uid %s, was %s", mp.UID, uid)
	}
	// The restarted client may post before its list of the node's pods
	// has come (an AlreadyExists, and the pod of the same hash taken as
	// made): only a create that made a pod counts.
	audit := c.Audit("default", "objects-"+node)
	creates, deletes := writes(audit)
	if creates != 1 || deletes != 0 {
		t.Errorf("%d creates and %d deletes of the mirror pod, want 1 and 0; audit:\n%s", creates, deletes, audit)
	}

	out, err := c.Kubectl("describe", "pod", "-n", "default", "objects-"+node)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{mirror.AnnotationNodeLocalObjects + ":", "volume tls: secret serving", "env main TOKEN: secret db key token", "imagePullSecrets: secret regcred"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe does not show %q:\n%s", want, out)
		}
	}
	t.Logf("audit of the mirror pod:\n%s", audit)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// writes counts the pod creates that made a pod and the deletes in an
// audit of kubeapi.Cluster.Audit.
func writes(audit string) (creates, deletes int) {
	for line := range strings.Lines(audit) {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[1] == "create" && strings.Contains(line, "code=201"):
			creates++
		case len(f) > 1 && f[1] == "delete":
			deletes++
		}
	}
	return creates, deletes
}
