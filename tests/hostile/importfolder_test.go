package hostile

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// TestHostileImportFolder drops hostile files into the import folder of a
// running daemon: archives that climb out of the store, a symlink to a secret,
// a FIFO and a symlink to a device. Each archive's import fails with a warning
// naming the file and the reason, the secret is not shown, the FIFO and the
// device are never opened, the store outside the folder's own bookkeeping is
// byte-identical, nothing outside the store changes, and a good archive dropped
// afterwards is still imported.
func TestHostileImportFolder(t *testing.T) {
	t.Parallel()
	d := testdaemon.New(t)
	c := plantCanary(t)
	d.Start()
	store := filepath.Join(d.RootDir, "images")
	folder := filepath.Join(store, "import")
	d.Eventually(10*time.Second, "the import folder", func() error { _, err := os.Stat(folder); return err })

	staging := t.TempDir()
	around := filepath.Dir(d.Dir)
	storeRel, _ := filepath.Rel(around, store)
	logsRel, _ := filepath.Rel(around, d.LogsDir)
	stagingRel, _ := filepath.Rel(around, staging) // where this test makes the files it drops
	outsideBefore := tree(t, around, storeRel, logsRel, stagingRel)
	// The folder and the record of what was tried in it are the import
	// watcher's own; the rest of the store must not change.
	// (Writing the record makes a temp file in the store's root: its mtime goes too.)
	storeBefore := treeStable(t, store, []string{".", "tmp"}, "import", "import-state.json")

	drop := func(name string, make func(p string)) string {
		p := filepath.Join(staging, name)
		make(p)
		dst := filepath.Join(folder, name)
		if err := os.Rename(p, dst); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	failing := map[string]string{
		drop("slip.tar", func(p string) { dockerWithLayer(t, p, []entry{{name: up + c.Dir[1:] + "/slip", body: "slip\n"}}) }): `escapes the layer root`,
		drop("link.tar", func(p string) {
			dockerWithLayer(t, p, []entry{{name: "esc", typ: tar.TypeSymlink, link: c.Dir}, {name: "esc/pwned", body: "pwned\n"}})
		}): `is not a directory: refusing to write through it`,
		drop("hardlink.tar", func(p string) {
			dockerWithLayer(t, p, []entry{{name: "h", typ: tar.TypeLink, link: c.Victim}})
		}): `hard link target`,
		drop("secret.tar", func(p string) {
			if err := os.Symlink(c.Secret, p); err != nil {
				t.Fatal(err)
			}
		}): `not a tar`,
	}
	skipped := []string{
		drop("pipe.tar", func(p string) {
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}),
		drop("zero.tar", func(p string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}),
	}

	for p, reason := range failing {
		re := regexp.MustCompile(`msg="image import failed[^"]*".*file=` + regexp.QuoteMeta(p) + ` .*` + reason)
		d.Eventually(20*time.Second, "the failed import of "+filepath.Base(p)+" logged", func() error {
			if !re.MatchString(d.Output()) {
				return fmt.Errorf("no warning matching %s", re)
			}
			return nil
		})
	}
	// A good archive after them: the watcher did not stop at the FIFO or the
	// device. Its import changes the store, so look at the store first.
	if after := treeStable(t, store, []string{".", "tmp"}, "import", "import-state.json"); after != storeBefore {
		t.Errorf("failed imports changed the store:\n%s", diffLines(storeBefore, after))
	}
	drop("good.tar", func(p string) {
		writeDocker(t, p, "example.com/good:v1", imageOf(t, nil, nil, []entry{{name: "good", body: "good\n"}}))
	})
	d.Eventually(20*time.Second, "the good archive imported", func() error {
		if out := d.CLI("images", "ls"); !strings.Contains(out, "example.com/good:v1") {
			return fmt.Errorf("images ls:\n%s", out)
		}
		return nil
	})
	out := d.Output()
	for _, p := range skipped {
		if strings.Contains(out, "file="+p+" ") {
			t.Errorf("the daemon tried to import %s, which is not a regular file:\n%s", p, out)
		}
	}
	c.noSecret(t, "the daemon's log", out)
	c.check(t)
	if after := tree(t, around, storeRel, logsRel, stagingRel); after != outsideBefore {
		t.Errorf("imports changed files outside the store:\n%s", diffLines(outsideBefore, after))
	}
	if devs := devicesUnder(t, around, store); len(devs) > 0 {
		t.Errorf("device nodes outside the store: %v", devs)
	}
}
