//go:build linux

package image

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A snapshot's directories are made, or taken if they are directories;
// anything else at their path (a file, a symlink, even to a directory)
// fails, as os.MkdirAll's ENOTDIR did.
func TestMkdirOrDir(t *testing.T) {
	dir := t.TempDir()
	if err := mkdirOrDir(filepath.Join(dir, "new")); err != nil {
		t.Errorf("new: %v", err)
	}
	if err := mkdirOrDir(filepath.Join(dir, "new")); err != nil {
		t.Errorf("existing directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "new"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"file", "link"} {
		if err := mkdirOrDir(filepath.Join(dir, name)); !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("%s: %v, want ENOTDIR", name, err)
		}
	}
}
