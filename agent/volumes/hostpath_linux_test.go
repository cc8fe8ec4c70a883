package volumes

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// The kubelet's seven hostPath type checks, against real files of each kind,
// and what a hostile host path cannot make them do.
func TestHostPathTypes(t *testing.T) {
	testroot.Require(t) // mknod of a block device
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	if err := os.Mkdir(p("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", p("sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := unix.Mknod(p("char"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(p("block"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	for link, target := range map[string]string{
		"dirlink": p("dir"), "dangling": secret, "danglingdir": secret + "dir",
	} {
		if err := os.Symlink(target, p(link)); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []string{"dir", "file", "sock", "char", "block"}
	for _, tc := range []struct {
		typ v1.HostPathType
		ok  string // the one kind it accepts
	}{
		{v1.HostPathDirectory, "dir"},
		{v1.HostPathFile, "file"},
		{v1.HostPathSocket, "sock"},
		{v1.HostPathCharDev, "char"},
		{v1.HostPathBlockDev, "block"},
		{v1.HostPathDirectoryOrCreate, "dir"},
		{v1.HostPathFileOrCreate, "file"},
	} {
		for _, k := range append(kinds, "missing") {
			typ := tc.typ
			path := p(k)
			if k == "missing" {
				path = p("missing-" + string(typ))
			}
			err := checkHostPath(&v1.HostPathVolumeSource{Path: path, Type: &typ})
			want := k == tc.ok || k == "missing" && strings.HasSuffix(string(typ), "OrCreate")
			if (err == nil) != want {
				t.Errorf("type %s on %s: err %v, want ok=%v", typ, k, err, want)
			}
			if err != nil && !strings.Contains(err.Error(), path) {
				t.Errorf("type %s on %s: error %q does not name the path", typ, k, err)
			}
		}
	}
	if fi, err := os.Stat(p("missing-DirectoryOrCreate")); err != nil || !fi.IsDir() {
		t.Errorf("DirectoryOrCreate made no directory: %v", err)
	}
	if fi, err := os.Stat(p("missing-FileOrCreate")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("FileOrCreate made no file: %v", err)
	}
	// Unset checks nothing; a symlink to a directory is a directory, as the
	// kubelet follows symlinks in hostPath.
	if err := checkHostPath(&v1.HostPathVolumeSource{Path: p("nothing")}); err != nil {
		t.Errorf("unset type: %v", err)
	}
	dirType := v1.HostPathDirectory
	if err := checkHostPath(&v1.HostPathVolumeSource{Path: p("dirlink"), Type: &dirType}); err != nil {
		t.Errorf("symlink to a directory: %v", err)
	}
	// A dangling symlink does not make FileOrCreate create a file where it
	// points (the kubelet's os.OpenFile(O_CREATE) would), nor
	// DirectoryOrCreate a directory.
	for _, tc := range []struct {
		link   string
		typ    v1.HostPathType
		target string
	}{{"dangling", v1.HostPathFileOrCreate, secret}, {"danglingdir", v1.HostPathDirectoryOrCreate, secret + "dir"}} {
		typ := tc.typ
		if err := checkHostPath(&v1.HostPathVolumeSource{Path: p(tc.link), Type: &typ}); err == nil {
			t.Errorf("%s through a dangling symlink: accepted", typ)
		}
		if _, err := os.Lstat(tc.target); !os.IsNotExist(err) {
			t.Errorf("%s through a dangling symlink made %s: %v", typ, tc.target, err)
		}
	}
}
