package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// A manifest's metadata.uid reaches SeenStore unchecked (CreateSandbox
// refuses it only later): the daemon makes any directory on the host and
// writes a file in it. With uid "../../../../etc/nologin" that directory
// alone makes pam_nologin refuse every non-root login.
func TestAttackSeenStoreWritesOutsideRootDir(t *testing.T) {
	top := t.TempDir()
	s := NewSeenStore(manifest.Paths{RootDir: filepath.Join(top, "root")})
	s.Seen("../../outside")
	if _, err := os.Stat(filepath.Join(top, "outside")); err == nil {
		t.Errorf("a pod's uid made %s, outside the root dir", filepath.Join(top, "outside"))
	}
}
