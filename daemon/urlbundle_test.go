package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/config"
)

// A bundle the manifest URL serves is staged no larger than the root dir's
// filesystem can take above the image store's reserve: a server cannot
// fill the node's disk with a body under the bundle bound.
func TestURLBundleStageKeepsTheReserve(t *testing.T) {
	root := t.TempDir()
	cfg := &config.Config{RootDir: root, ImageGCHighThresholdPercent: 85}
	d := &System{trial: newBundleTrial(root, nil, nil)}
	st := d.urlBundle(cfg, false).Stage
	if st.Room == nil {
		t.Fatalf("the URL's bundle stage is bounded by %d bytes alone, whatever the disk has free", st.MaxBytes)
	}
	if err := os.MkdirAll(st.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	room, err := st.Room()
	if err != nil {
		t.Fatal(err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Join(root), &fs); err != nil {
		t.Fatal(err)
	}
	free, size := int64(fs.Bavail)*fs.Bsize, int64(fs.Blocks)*fs.Bsize
	if want := free - size/100*15; room > max(want, 0)+1<<20 {
		t.Errorf("room %d bytes, want at most %d (free %d less 15%% of %d)", room, want, free, size)
	}
}
