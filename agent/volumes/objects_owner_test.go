package volumes

import (
	"os"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
)

// A configMap volume's own directory is the kubelet's wrapped emptyDir's:
// 0777, so that a pod's non-root user can enter it, and with fsGroup group
// fsGroup with setgid (drwxrwsrwx), as make test-conformance compares with
// the real kubelet. (A secret or projected volume's, on a tmpfs, keeps the
// sticky bit as well; the conformance test checks that one, since a tmpfs
// needs root.)
func TestObjectVolumeDirectory(t *testing.T) {
	for _, tc := range []struct {
		name, securityContext string
		mode                  os.FileMode
		gid                   uint32
	}{
		{"no fsGroup", "", 0o777, uint32(os.Getgid())},
		{"fsGroup", "  securityContext: {fsGroup: 2000}\n", 0o777 | os.ModeSetgid, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gid != uint32(os.Getgid()) && os.Geteuid() != 0 {
				t.Skip("chown to another group needs root")
			}
			pod := mustParse(t, `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
`+tc.securityContext+`  volumes:
  - {name: all, configMap: {name: cm}}
  containers: [{name: c, image: i}]
`)
			root := poddir.Root(t.TempDir())
			h := manifest.Host{Objects: fakeObjects{"default/cm": &v1.ConfigMap{Data: map[string]string{"a": "1"}}}}
			if err := Prepare(pod, root, h); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(root.ConfigMap(string(pod.UID), "all"))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode() &^ os.ModeDir; got != tc.mode || fi.Sys().(*syscall.Stat_t).Gid != tc.gid {
				t.Errorf("the volume's directory: %v group %d, want %v group %d", got, fi.Sys().(*syscall.Stat_t).Gid, tc.mode, tc.gid)
			}
		})
	}
}
