package volumes

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
)

type fakeObjects map[string]*v1.ConfigMap

func (f fakeObjects) ConfigMap(ns, name string) *v1.ConfigMap { return f[ns+"/"+name] }
func (f fakeObjects) Secret(string, string) *v1.Secret        { return nil }

// A configMap volume as the kubelet's: items at their paths and modes, an
// update swapped in, a missing object a SetUpError worded as FailedMount,
// an optional one an empty volume.
func TestConfigMapVolume(t *testing.T) {
	pod := mustParse(t, `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  volumes:
  - {name: all, configMap: {name: cm, defaultMode: 0600}}
  - {name: some, configMap: {name: cm, items: [{key: b, path: d/b, mode: 0640}]}}
  - {name: opt, configMap: {name: gone, optional: true}}
  containers: [{name: c, image: i}]
`)
	root := poddir.Root(t.TempDir())
	uid := string(pod.UID)
	cm := &v1.ConfigMap{Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {0, 1}}}
	h := manifest.Host{Objects: fakeObjects{"default/cm": cm}}
	if err := Prepare(pod, root, h); err != nil {
		t.Fatal(err)
	}
	check := func(path, want string, mode os.FileMode) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		if string(data) != want || fi.Mode().Perm() != mode {
			t.Errorf("%s: %q %v, want %q %v", path, data, fi.Mode().Perm(), want, mode)
		}
	}
	check(filepath.Join(root.ConfigMap(uid, "all"), "a"), "1", 0o600)
	check(filepath.Join(root.ConfigMap(uid, "all"), "b"), "\x00\x01", 0o600)
	check(filepath.Join(root.ConfigMap(uid, "some"), "d/b"), "\x00\x01", 0o640)
	if _, err := os.Stat(filepath.Join(root.ConfigMap(uid, "some"), "a")); !os.IsNotExist(err) {
		t.Errorf("a key items do not name is there: %v", err)
	}
	if entries, err := os.ReadDir(root.ConfigMap(uid, "opt")); err != nil || len(entries) != 2 { // ..data and its directory
		t.Errorf("optional volume: %v %v", entries, err)
	}
	old, _ := os.Readlink(filepath.Join(root.ConfigMap(uid, "all"), "..data"))

	cm2 := &v1.ConfigMap{Data: map[string]string{"a": "2", "b": "x"}}
	if err := Refresh(pod, root, manifest.Host{Objects: fakeObjects{"default/cm": cm2}}); err != nil {
		t.Fatal(err)
	}
	check(filepath.Join(root.ConfigMap(uid, "all"), "a"), "2", 0o600)
	if now, _ := os.Readlink(filepath.Join(root.ConfigMap(uid, "all"), "..data")); now == old {
		t.Errorf("..data still names %s", old)
	}

	// Gone: the volumes keep what they had; a pod not set up yet fails.
	err := Refresh(pod, root, manifest.Host{})
	su := SetUpErrors(err)
	if len(su) != 2 || su[0].Error() != `MountVolume.SetUp failed for volume "all" : configmap "cm" not found` {
		t.Fatalf("Refresh without the ConfigMap: %v", err)
	}
	check(filepath.Join(root.ConfigMap(uid, "all"), "a"), "2", 0o600)

	other := pod.DeepCopy()
	other.UID = "other"
	err = Prepare(other, root, manifest.Host{Objects: fakeObjects{"default/cm": &v1.ConfigMap{}}})
	if su := SetUpErrors(err); len(su) != 1 || su[0].Error() != `MountVolume.SetUp failed for volume "some" : configmap references non-existent config key: b` {
		t.Fatalf("Prepare without the key: %v", err)
	}
	if _, err := os.Stat(root.ConfigMap("other", "some")); !os.IsNotExist(err) {
		t.Errorf("a volume that could not be set up left a directory: %v", err)
	}
}

// Paths a manifest or an object controls never leave the volume, nor
// replace its ..data: refused whole, nothing written.
func TestObjectVolumeHostilePaths(t *testing.T) {
	root := poddir.Root(t.TempDir())
	for _, tc := range []struct {
		items []v1.KeyToPath
		data  map[string]string
	}{
		{[]v1.KeyToPath{{Key: "k", Path: "../../escape"}}, map[string]string{"k": "x"}},
		{[]v1.KeyToPath{{Key: "k", Path: "/etc/escape"}}, map[string]string{"k": "x"}},
		{[]v1.KeyToPath{{Key: "k", Path: "..data"}}, map[string]string{"k": "x"}},
		{nil, map[string]string{"..data": "x"}},
		{nil, map[string]string{"../escape": "x"}},
	} {
		pod := &v1.Pod{}
		pod.UID, pod.Namespace = "u", "default"
		pod.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: tc.items}}}}
		err := Prepare(pod, root, manifest.Host{Objects: fakeObjects{"default/cm": {Data: tc.data}}})
		if len(SetUpErrors(err)) != 1 {
			t.Errorf("%+v %v: err = %v, want a SetUpError", tc.items, tc.data, err)
		}
		if _, err := os.Lstat(filepath.Join(root.ConfigMap("u", "v"), "..data")); !os.IsNotExist(err) {
			t.Errorf("%+v %v: ..data written: %v", tc.items, tc.data, err)
		}
	}
	var found []string
	_ = filepath.WalkDir(string(root), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 0 {
		t.Errorf("files written: %q", found)
	}
}
