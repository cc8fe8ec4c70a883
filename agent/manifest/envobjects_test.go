package manifest

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// fakeObjects holds ConfigMaps and Secrets by namespace/name.
type fakeObjects struct {
	cms     map[string]*v1.ConfigMap
	secrets map[string]*v1.Secret
}

func (f fakeObjects) ConfigMap(ns, name string) *v1.ConfigMap { return f.cms[ns+"/"+name] }
func (f fakeObjects) Secret(ns, name string) *v1.Secret       { return f.secrets[ns+"/"+name] }

func objectsPod(c v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
}

func TestEnvFromObjects(t *testing.T) {
	yes := true
	objs := fakeObjects{
		cms:     map[string]*v1.ConfigMap{"ns/cm": {Data: map[string]string{"B": "b", "A": "a", "1x": "digit"}}},
		secrets: map[string]*v1.Secret{"ns/s": {Data: map[string][]byte{"pw": []byte("hunter2")}}},
	}
	c := v1.Container{
		Name: "c",
		EnvFrom: []v1.EnvFromSource{
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
			{Prefix: "S_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}},
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: &yes}},
		},
		Env: []v1.EnvVar{
			{Name: "A", Value: "over $(B)"},
			{Name: "K", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "B"}}},
			{Name: "PW", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "pw"}}},
			{Name: "URL", Value: "http://u:$(PW)@h"},
			{Name: "OPT", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "nokey", Optional: &yes}}},
			{Name: "OPT2", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "none"}, Key: "k", Optional: &yes}}},
		},
	}
	got, err := containerEnv(objectsPod(c), &c, Paths{}, Host{Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	want := []podspec.EnvVar{
		{Name: "1x", Value: "digit"},
		{Name: "A", Value: "over b"},
		{Name: "B", Value: "b"},
		{Name: "S_pw", Value: "hunter2", Sensitive: true},
		{Name: "K", Value: "b"},
		{Name: "PW", Value: "hunter2", Sensitive: true},
		{Name: "URL", Value: "http://u:hunter2@h", Sensitive: true},
	}
	if len(got) != len(want) {
		t.Fatalf("env = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Value != want[i].Value || got[i].Sensitive != want[i].Sensitive || got[i].File != nil {
			t.Errorf("env[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The kubelet's messages of CreateContainerConfigError.
func TestEnvMissingObjects(t *testing.T) {
	objs := fakeObjects{cms: map[string]*v1.ConfigMap{"ns/cm": {Data: map[string]string{"a": "1"}}}, secrets: map[string]*v1.Secret{"ns/s": {}}}
	ref := func(name, key string) *v1.EnvVarSource {
		return &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key}}
	}
	for _, tc := range []struct {
		c    v1.Container
		objs Objects
		want string
	}{
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: ref("x", "a")}}}, objs, `configmap "x" not found`},
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: ref("x", "a")}}}, nil, `configmap "x" not found`},
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: ref("cm", "k")}}}, objs, `couldn't find key k in ConfigMap ns/cm`},
		{v1.Container{Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}}}}}, objs, `couldn't find key k in Secret ns/s`},
		{v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "y"}}}}}, objs, `secret "y" not found`},
	} {
		tc.c.Name = "c"
		pod := objectsPod(tc.c)
		_, err := Container(pod, &pod.Spec.Containers[0], 0, Paths{}, Host{Objects: tc.objs})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: err = %v, want %q", tc.c, err, tc.want)
		}
		if !IsMissing(err) {
			t.Errorf("%v is not a MissingError", err)
		}
	}
}
