package manifest

import (
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/poddir"
)

// metadata.uid is kept from the manifest, as the kubelet does, and names
// <root-dir>/pods/<uid>, the pod's emptyDirs and its log directory. A uid
// that is not one path component takes those outside the root dir: it must
// be refused where the manifest is read, not only by CreateSandbox.
func TestAttackManifestUIDLeavesRootDir(t *testing.T) {
	for _, uid := range []string{"../../../../etc/nologin", "..", "a/b", "."} {
		data := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  uid: \"" + uid + "\"\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n"
		pods, _, err := ParseFile([]byte(data), "/m/a.yaml", "n")
		if err == nil {
			t.Errorf("uid %q accepted: pod dir %s", uid, poddir.Root("/var/lib/staticpodd").Pod(string(pods[0].UID)))
		} else if !strings.Contains(err.Error(), "metadata.uid") {
			t.Errorf("uid %q: error %v does not name metadata.uid", uid, err)
		}
	}
}
