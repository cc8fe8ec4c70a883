package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
)

func mustParse(t *testing.T, doc string) *v1.Pod {
	t.Helper()
	pods, _, err := manifest.ParseFile([]byte(doc), "/m/p.yaml", "node1")
	if err != nil {
		t.Fatal(err)
	}
	return pods[0].Pod
}

func TestPrepareAndRemoveVolumes(t *testing.T) {
	host := t.TempDir()
	sock := filepath.Join(host, "missing.sock")
	doc := `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  volumes:
  - {name: made, hostPath: {path: ` + host + `/made/dir, type: DirectoryOrCreate}}
  - {name: file, hostPath: {path: ` + host + `/file.conf, type: FileOrCreate}}
  - {name: any, hostPath: {path: ` + host + `/whatever}}
  - {name: scratch, emptyDir: {}}
  containers:
  - name: c
    image: i
    volumeMounts: [{name: scratch, mountPath: /s, subPath: deep/er}]
`
	pod := mustParse(t, doc)
	p := manifest.Paths{RootDir: t.TempDir(), PodLogsDir: t.TempDir()}
	root := poddir.Root(p.RootDir)
	for range 2 { // idempotent
		if err := Prepare(pod, root, manifest.Host{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{host + "/made/dir", root.EmptyDir(string(pod.UID), "scratch")} {
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			t.Errorf("%s: want a directory, %v", path, err)
		}
	}
	// subPaths are the runtime's to make, inside the volume, at start.
	if _, err := os.Lstat(root.EmptyDir(string(pod.UID), "scratch") + "/deep"); !os.IsNotExist(err) {
		t.Errorf("Prepare made a subPath directory: %v", err)
	}
	if fi, err := os.Stat(host + "/file.conf"); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("file.conf: want a file, %v", err)
	}
	if fi, _ := os.Stat(root.EmptyDir(string(pod.UID), "scratch")); fi.Mode().Perm() != 0o777 {
		t.Errorf("emptyDir mode %v, want 0777", fi.Mode().Perm())
	}
	if err := Remove(string(pod.UID), root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root.Pod(string(pod.UID))); !os.IsNotExist(err) {
		t.Errorf("pod dir still there: %v", err)
	}
	if _, err := os.Stat(host + "/made/dir"); err != nil {
		t.Errorf("Remove touched a hostPath: %v", err)
	}
	if err := Remove(string(pod.UID), root); err != nil {
		t.Errorf("second Remove: %v", err)
	}

	for typ, path := range map[string]string{
		"Directory": host + "/file.conf", "File": host + "/made", "Socket": sock,
		"CharDevice": host + "/file.conf", "BlockDevice": "/dev/null",
	} {
		bad := mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  volumes: [{name: v, hostPath: {path: "+path+", type: "+typ+"}}]\n  containers: [{name: c, image: i}]\n")
		if err := Prepare(bad, root, manifest.Host{}); err == nil || !strings.Contains(err.Error(), "hostPath type check failed") {
			t.Errorf("%s on %s: err = %v", typ, path, err)
		}
	}
	ok := mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  volumes: [{name: v, hostPath: {path: /dev/null, type: CharDevice}}]\n  containers: [{name: c, image: i}]\n")
	if err := Prepare(ok, root, manifest.Host{}); err != nil {
		t.Errorf("CharDevice /dev/null: %v", err)
	}
}
