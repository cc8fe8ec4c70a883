//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// mountTmpfs mounts a tmpfs at dir, unmounted when the test ends.
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
}

// sharedDir is a directory that is a shared mount of its own.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A read-only hostPath whose submount stays writable unless the bind is
// recursively read-only (recursiveReadOnly).
func TestRecursiveReadOnlyFromInside(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	mountTmpfs(t, filepath.Join(dir, "sub"))
	pod := e.reportPod(nil)
	const script = `
if touch /vol/x 2>/dev/null; then echo top=rw; else echo top=ro; fi
if touch /vol/sub/x 2>/dev/null; then echo sub=rw; else echo sub=ro; fi
`
	for _, tc := range []struct {
		name     string
		rro      bool
		top, sub string
	}{
		{"ro", false, "ro", "rw"},
		{"rro", true, "ro", "ro"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.container(pod, tc.name, script)
			c.Mounts = []podspec.Mount{{Destination: "/vol", Type: "bind", Source: dir, ReadOnly: true, RecursiveReadOnly: tc.rro}}
			got := e.run(pod, c)
			if got["top"] != tc.top || got["sub"] != tc.sub {
				t.Errorf("volume %s, its submount %s; want %s and %s", got["top"], got["sub"], tc.top, tc.sub)
			}
		})
	}
}

// mountPropagation as the container's mountinfo shows it: None is private,
// HostToContainer a slave of the host's mount, Bidirectional (privileged)
// shared with it, so a mount the container makes shows on the host.
func TestMountPropagationFromInside(t *testing.T) {
	e := newEnv(t)
	dir := sharedDir(t)
	pod := e.reportPod(nil)
	const script = `
echo opts=$(awk '$5 == "/vol" { for (i = 7; $i != "-"; i++) printf "%s ", $i }' /proc/self/mountinfo)
if [ -n "$MOUNT" ]; then mkdir -p /vol/inner && mount -t tmpfs none /vol/inner && echo hi > /vol/inner/file && echo mounted=yes; fi
`
	for _, tc := range []struct {
		name       string
		prop       podspec.Propagation
		privileged bool
		want       []string // in the optional fields
		wantNot    []string
	}{
		{"none", podspec.PropagationNone, false, nil, []string{"shared:", "master:"}},
		{"hosttocontainer", podspec.PropagationHostToContainer, false, []string{"master:"}, []string{"shared:"}},
		{"bidirectional", podspec.PropagationBidirectional, true, []string{"shared:"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.container(pod, tc.name, script)
			c.Mounts = []podspec.Mount{{Destination: "/vol", Type: "bind", Source: dir, Propagation: tc.prop}}
			c.Security.Privileged = tc.privileged
			if tc.privileged {
				c.Env = []podspec.EnvVar{{Name: "MOUNT", Value: "1"}}
			}
			got := e.run(pod, c)
			for _, w := range tc.want {
				if !strings.Contains(got["opts"], w) {
					t.Errorf("mountinfo optional fields %q, want %s", got["opts"], w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got["opts"], w) {
					t.Errorf("mountinfo optional fields %q, want no %s", got["opts"], w)
				}
			}
			if tc.privileged {
				inner := filepath.Join(dir, "inner")
				defer unix.Unmount(inner, unix.MNT_DETACH)
				if b, err := os.ReadFile(filepath.Join(inner, "file")); err != nil || string(b) != "hi\n" {
					t.Errorf("the container's mount is not seen on the host: %q %v (container said %v)", b, err, got)
				}
			}
		})
	}
	// A source on a private mount cannot propagate: refused, saying so.
	private := t.TempDir()
	c := e.container(pod, "private", "true")
	c.Mounts = []podspec.Mount{{Destination: "/vol", Type: "bind", Source: private, Propagation: podspec.PropagationHostToContainer}}
	_, err := e.rt.StartContainer(context.Background(), pod, c)
	if err == nil || !strings.Contains(err.Error(), "neither a shared nor a slave mount") {
		t.Fatalf("HostToContainer from a private mount: err %v", err)
	}
	if !errors.Is(err, podspec.ErrContainerConfig) {
		t.Errorf("err %v is not ErrContainerConfig (CreateContainerConfigError)", err)
	}
}
