package image

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// ImportDir imports what the import folder holds before it returns, and a
// watch started after it does not import the same files again.
func TestImportDir(t *testing.T) {
	testroot.Require(t)
	fails := &failures{}
	s, err := Open(filepath.Join(t.TempDir(), "images"), slog.New(fails))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Root(), "import")
	if err := s.ImportDir(context.Background(), dir); err != nil {
		t.Fatalf("ImportDir of a missing folder: %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeDockerArchive(t, filepath.Join(dir, "boot.tar"), map[string]v1.Image{"boot:v1": testImage(t, baseEntries)})
	bad := filepath.Join(dir, "bad.tar")
	if err := os.WriteFile(bad, []byte("not an archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.ImportDir(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("boot:v1"); err != nil {
		t.Errorf("boot:v1 not in the store after ImportDir: %v", err)
	}
	if n := fails.count(bad); n != 1 {
		t.Errorf("bad.tar reported %d times, want once", n)
	}

	got, stop := startWatch(t, s, dir)
	writeDockerArchive(t, filepath.Join(dir, "late.tar"), map[string]v1.Image{"late:v1": testImage(t)})
	waitImport(t, got, "docker.io/library/late:v1")
	stop()
	select {
	case imgs := <-got:
		t.Errorf("the watch imported again what ImportDir had: %+v", imgs)
	default:
	}
	if n := fails.count(bad); n != 1 {
		t.Errorf("bad.tar reported %d times after the watch, want once", n)
	}
}
