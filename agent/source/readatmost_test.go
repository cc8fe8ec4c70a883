package source

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// readAtMost takes a regular file of up to limit bytes, refuses one byte
// more, and refuses what is not a regular file without blocking on it.
func TestReadAtMost(t *testing.T) {
	const limit = 100
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		size    int
		wantErr string
	}{
		{"empty", 0, ""},
		{"one under", limit - 1, ""},
		{"at the limit", limit, ""},
		{"one over", limit + 1, "larger than 100 bytes"},
		{"far over", 10 * limit, "larger than 100 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			want := bytes.Repeat([]byte("x"), tc.size)
			if err := os.WriteFile(path, want, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readAtMost(path, limit)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, %v; want %d bytes", len(got), err, tc.size)
			}
		})
	}
	t.Run("fifo", func(t *testing.T) {
		path := filepath.Join(dir, "fifo")
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readAtMost(path, limit); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err = %v, want not a regular file", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		if _, err := readAtMost(dir, limit); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err = %v, want not a regular file", err)
		}
	})
}
