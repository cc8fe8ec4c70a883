//go:build linux

package oci

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// hostileVolume lays out a host with a secret beside a volume a container
// can write: host/secret/canary, host/vol.
func hostileVolume(t *testing.T) (host, vol string) {
	t.Helper()
	host = t.TempDir()
	vol = filepath.Join(host, "vol")
	for _, d := range []string{vol, filepath.Join(host, "secret")} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(vol, 0o777); err != nil { // an emptyDir's mode, past the umask
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "secret", "canary"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return host, vol
}

// snapshot lists every path below dir (but vol) with its size, to prove
// that nothing outside the volume was made or changed.
func snapshot(t *testing.T, dir, skip string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		b.WriteString(p + " " + fi.Mode().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestOpenSubPath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(host, vol string) error
		sub   string
		want  string // path inside vol it must open; "" = refused
		err   string
	}{
		{"plain directory", func(h, v string) error { return os.Mkdir(v+"/sub", 0o755) }, "sub", "sub", ""},
		{"missing, made inside", nil, "a/b/c", "a/b/c", ""},
		{"a file", func(h, v string) error { return os.WriteFile(v+"/f", nil, 0o644) }, "f", "f", ""},
		{"relative link inside", func(h, v string) error {
			return errors.Join(os.Mkdir(v+"/real", 0o755), os.Symlink("real", v+"/link"))
		}, "link", "real", ""},
		{"absolute link to /", func(h, v string) error { return os.Symlink("/", v+"/sub") }, "sub", "", "leaves the volume"},
		{"absolute link to the host dir", func(h, v string) error { return os.Symlink(h+"/secret", v+"/sub") }, "sub", "", "leaves the volume"},
		{"relative ../ link", func(h, v string) error { return os.Symlink("../secret", v+"/sub") }, "sub", "", "leaves the volume"},
		{"deep relative link", func(h, v string) error {
			return errors.Join(os.MkdirAll(v+"/a/b", 0o755), os.Symlink("../../../secret", v+"/a/b/sub"))
		}, "a/b/sub", "", "leaves the volume"},
		{"link at an intermediate component", func(h, v string) error { return os.Symlink(h+"/secret", v+"/a") }, "a/canary", "", "leaves the volume"},
		{"link at an intermediate component, rest missing", func(h, v string) error { return os.Symlink(h+"/secret", v+"/a") }, "a/new/dir", "", "leaves the volume"},
		{"link to a file outside", func(h, v string) error { return os.Symlink(h+"/secret/canary", v+"/f") }, "f", "", "leaves the volume"},
		{"dangling link outside", func(h, v string) error { return os.Symlink(h+"/nope", v+"/d") }, "d", "", "leaves the volume"},
		{"proc magic link", func(h, v string) error { return os.Symlink("/proc/self/root", v+"/m") }, "m", "", "leaves the volume"},
		{"file in the way", func(h, v string) error { return os.WriteFile(v+"/f", nil, 0o644) }, "f/x", "", "not a directory"},
		{"backsteps", nil, "a/../../secret", "", "without '..'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, vol := hostileVolume(t)
			if tc.setup != nil {
				if err := tc.setup(host, vol); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, host, vol)
			f, err := openSubPath(vol, tc.sub)
			if after := snapshot(t, host, vol); after != before {
				t.Errorf("the host outside the volume changed:\n%s\nwant\n%s", after, before)
			}
			if tc.want == "" {
				if err == nil {
					f.Close()
					t.Fatalf("opened %s, want it refused", f.Name())
				}
				if !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sameFile(t, f, filepath.Join(vol, tc.want))
			if tc.setup == nil { // made: with the volume's mode, whatever the umask
				fi, err := os.Stat(filepath.Join(vol, tc.want))
				if err != nil || fi.Mode().Perm() != 0o777 {
					t.Errorf("made %s: %v, mode %v, want 0777", tc.want, err, fi.Mode().Perm())
				}
			}
		})
	}
}

// Without openat2 every symlink is refused, even one that stays inside.
func TestOpenNoSymlinks(t *testing.T) {
	host, vol := hostileVolume(t)
	if err := errors.Join(os.MkdirAll(vol+"/a/b", 0o755), os.Symlink("b", vol+"/a/in"), os.Symlink(host+"/secret", vol+"/out")); err != nil {
		t.Fatal(err)
	}
	root, err := unix.Open(vol, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	for sub, ok := range map[string]bool{"a/b": true, "a/in": false, "out": false, "out/canary": false} {
		fd, err := openNoSymlinks(root, sub)
		if ok != (err == nil) {
			t.Errorf("%s: err = %v, want ok=%v", sub, err, ok)
		}
		if err == nil {
			unix.Close(fd)
		} else if !ok && !errors.Is(err, unix.ELOOP) {
			t.Errorf("%s: err = %v, want ELOOP", sub, err)
		}
	}
	if err := mkdirIn(root, "a/b/c/d", 0o750, openNoSymlinks); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(vol + "/a/b/c/d"); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Errorf("a/b/c/d: %v %v", fi, err)
	}
	if err := mkdirIn(root, "out/x", 0o750, openNoSymlinks); err == nil {
		t.Error("made a directory through a symlink")
	}
	if _, err := os.Lstat(host + "/secret/x"); err == nil {
		t.Error("a directory was made outside the volume")
	}
}

func sameFile(t *testing.T, f *os.File, want string) {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(want, &b); err != nil {
		t.Fatal(err)
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		t.Errorf("opened %s, not %s", f.Name(), want)
	}
}

// The bind is of what was checked, and goes with unmountSubPaths, leaving the
// volume's content in place.
func TestBindSubPaths(t *testing.T) {
	testroot.Require(t)
	host, vol := hostileVolume(t)
	if err := errors.Join(os.Mkdir(vol+"/data", 0o755), os.WriteFile(vol+"/data/keep", []byte("volume data"), 0o644),
		os.WriteFile(vol+"/conf", []byte("a file"), 0o644), os.Symlink("/", vol+"/evil")); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "ctr")
	ms := []podspec.Mount{
		{Destination: "/whole", Type: "bind", Source: vol},
		{Destination: "/data", Type: "bind", Source: vol, SubPath: "data"},
		{Destination: "/etc/conf", Type: "bind", Source: vol, SubPath: "conf", ReadOnly: true},
		{Destination: "/new", Type: "bind", Source: vol, SubPath: "made/here"},
	}
	got, err := bindSubPaths(filepath.Join(state, subPathsDir), ms)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmountSubPaths(state) })
	if !reflect.DeepEqual(got[0], ms[0]) || ms[1].SubPath != "data" {
		t.Errorf("mounts without subPath changed, or the input was: %+v", got)
	}
	for i, want := range map[int]string{1: "data", 2: "conf", 3: "made/here"} {
		if got[i].SubPath != "" || got[i].Source != filepath.Join(state, subPathsDir, string(rune('0'+i))) {
			t.Errorf("mount %d = %+v", i, got[i])
		}
		f, err := os.Open(got[i].Source)
		if err != nil {
			t.Fatal(err)
		}
		sameFile(t, f, filepath.Join(vol, want))
		f.Close()
	}
	if b, err := os.ReadFile(got[1].Source + "/keep"); err != nil || string(b) != "volume data" {
		t.Errorf("bind of data: %q %v", b, err)
	}

	_, err = bindSubPaths(filepath.Join(t.TempDir(), subPathsDir), []podspec.Mount{{Destination: "/x", Type: "bind", Source: vol, SubPath: "evil/etc"}})
	if !errors.Is(err, podspec.ErrContainerConfig) || !strings.Contains(err.Error(), "volumeMount at /x") || !strings.Contains(err.Error(), "leaves the volume") {
		t.Errorf("escape: err = %v, want a container config error naming the mount", err)
	}

	if err := unmountSubPaths(state); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, subPathsDir)); !os.IsNotExist(err) {
		t.Errorf("subpaths dir left: %v", err)
	}
	if b, err := os.ReadFile(vol + "/data/keep"); err != nil || string(b) != "volume data" {
		t.Errorf("volume content after unmount: %q %v", b, err)
	}
	if b, err := os.ReadFile(host + "/secret/canary"); err != nil || string(b) != "host secret" {
		t.Errorf("canary: %q %v", b, err)
	}
}

// A container swapping the subPath between a directory and a symlink out of
// the volume while starts bind it never gets the host: each bind is of the
// directory inside, or the start is refused.
func TestBindSubPathRace(t *testing.T) {
	testroot.Require(t)
	host, vol := hostileVolume(t)
	inside := vol + "/sub"
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	if err := os.Symlink(host+"/secret", vol+"/link"); err != nil {
		t.Fatal(err)
	}
	go func() { // the container: sub is always there, a directory or a symlink out
		defer wg.Done()
		for !stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, inside, unix.AT_FDCWD, vol+"/link", unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var bound, refused int
	for i := 0; i < 500; i++ {
		state := filepath.Join(t.TempDir(), "ctr")
		ms, err := bindSubPaths(filepath.Join(state, subPathsDir), []podspec.Mount{{Destination: "/v", Type: "bind", Source: vol, SubPath: "sub"}})
		if err != nil {
			refused++
		} else {
			bound++
			if _, err := os.Stat(ms[0].Source + "/canary"); err == nil {
				t.Errorf("bind %d shows the host's secret", i)
			}
		}
		if err := unmountSubPaths(state); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("500 starts under a swapping container: %d bound inside, %d refused", bound, refused)
	if bound == 0 || refused == 0 {
		t.Errorf("the swap did not race the binds (%d bound, %d refused): the test proves nothing", bound, refused)
	}
	if entries, _ := os.ReadDir(host + "/secret"); len(entries) != 1 {
		t.Errorf("the host's secret dir changed: %v", entries)
	}
}
