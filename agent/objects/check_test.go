package objects

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func cmObj(origin, name string, keys ...string) *Object {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string]string{}}
	for _, k := range keys {
		cm.Data[k] = "v"
	}
	return &Object{Origin: origin, ConfigMap: cm}
}

func secObj(origin, name string, creds map[string]string, keys ...string) *Object {
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string][]byte{}}
	for _, k := range keys {
		s.Data[k] = []byte(canary)
	}
	return &Object{Origin: origin, Secret: s, Credentials: creds}
}

// A pod's references are checked as the kubelet follows them: a missing
// non-optional object or key is an error naming the field and the object,
// an optional one nothing, a missing imagePullSecret a warning.
func TestCheckAll(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-node1"}, Spec: v1.PodSpec{
		Volumes: []v1.Volume{
			{Name: "a", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
				Items: []v1.KeyToPath{{Key: "present", Path: "p"}, {Key: "absent", Path: "q"}}}}},
			{Name: "b", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nosecret"}}},
			{Name: "c", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nosecret2", Optional: ptr(true)}}},
			{Name: "d", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "keys"}, Items: []v1.KeyToPath{{Key: "tls.key", Path: "k"}}}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}}},
			}}}},
		},
		InitContainers: []v1.Container{{Name: "i", EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "keys"}}}}}},
		Containers: []v1.Container{{Name: "c",
			EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "envcfg"}, Optional: ptr(true)}}},
			Env: []v1.EnvVar{
				{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "keys"}, Key: "nokey"}}},
				{Name: "B", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "nokey", Optional: ptr(true)}}},
				{Name: "C", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			}}},
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "regcred"}},
	}}
	objs := []*Object{
		cmObj("/m/b.yaml", "cfg", "present"),
		cmObj("/m/a.yaml", "cfg", "present", "absent"), // the first by origin is used
		secObj("/m/keys.yaml", "keys", map[string]string{"tls.key": "apiserver.key"}),
	}
	read := func(name string, limit int64) ([]byte, error) { return nil, errors.New("no such file or directory") }
	var got []string
	for _, i := range CheckAll([]PodOf{{Origin: "/m/web.yaml", Pod: pod}}, objs, read) {
		s := i.Origin + ": " + i.Field + ": " + i.Reason
		if i.Warning {
			s = "warning: " + s
		}
		got = append(got, s)
	}
	want := []string{
		"/m/b.yaml: metadata.name: ConfigMap default/cfg is defined both in /m/a.yaml and in /m/b.yaml; using the one from /m/a.yaml",
		`/m/keys.yaml: metadata.annotations[staticpodd.io/credentials]: Secret default/keys: key "tls.key": credential "apiserver.key": no such file or directory`,
		`/m/web.yaml: spec.volumes[1].secret.secretName: Not found: "nosecret": secret "nosecret" not found in namespace default`,
		`/m/web.yaml: spec.volumes[3].projected.sources[1].configMap.name: Not found: "gone": configmap "gone" not found in namespace default`,
		`/m/web.yaml: spec.containers[0].env[0].valueFrom.secretKeyRef.key: Not found: "nokey": couldn't find key nokey in Secret default/keys`,
		`warning: /m/web.yaml: spec.imagePullSecrets[0].name: Not found: "regcred": secret "regcred" not found in namespace default; its images are pulled with the node's credentials only`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Without a credentials directory, the credentials are said not checked.
	issues := CheckAll(nil, []*Object{secObj("/m/keys.yaml", "keys", map[string]string{"k": "c"})}, nil)
	if len(issues) != 1 || !issues[0].Warning || !strings.Contains(issues[0].Reason, "credentials not checked: no credentials directory given") {
		t.Errorf("issues %+v", issues)
	}
}
