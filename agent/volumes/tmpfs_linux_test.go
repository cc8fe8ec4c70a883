package volumes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

func TestMemoryEmptyDirIsSizedTmpfs(t *testing.T) {
	testroot.Require(t)
	pod := mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  volumes: [{name: fast, emptyDir: {medium: Memory, sizeLimit: 8Mi}}]\n  containers: [{name: c, image: i}]\n")
	p := manifest.Paths{RootDir: t.TempDir(), PodLogsDir: t.TempDir()}
	root := poddir.Root(p.RootDir)
	dir := root.EmptyDir(string(pod.UID), "fast")
	t.Cleanup(func() { _ = unmountIfMounted(dir) })
	for range 2 {
		if err := Prepare(pod, root, manifest.Host{}); err != nil {
			t.Fatal(err)
		}
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[1] == dir {
			found = append(found, line)
		}
	}
	if len(found) != 1 || !strings.HasPrefix(found[0], "tmpfs ") || !strings.Contains(found[0], "size=8192k") {
		t.Fatalf("mounts on %s = %q, want one tmpfs of 8Mi", dir, found)
	}
	// The kubelet's memory emptyDir keeps its tmpfs's 1777 (drwxrwxrwt):
	// one container user cannot remove another's files.
	if fi, err := os.Stat(dir); err != nil || fi.Mode()&^os.ModeDir != 0o777|os.ModeSticky {
		t.Errorf("memory emptyDir: %v, %v; want mode trwxrwxrwx", fi.Mode(), err)
	}
	if err := Remove(string(pod.UID), root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root.Pod(string(pod.UID))); !os.IsNotExist(err) {
		t.Errorf("pod dir left: %v", err)
	}
}

// A leftover pod directory's memory emptyDir is unmounted before the directory
// goes; one with anything else mounted under it is refused, and what that
// mount shows is untouched.
func TestRemoveLeftoverPodDirsNeverThroughAMount(t *testing.T) {
	testroot.Require(t)
	root := poddir.Root(t.TempDir())
	fast := root.EmptyDir("memory", "fast")
	if err := os.MkdirAll(fast, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := mountTmpfs(fast, 1<<20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmountIfMounted(fast) })
	if err := os.WriteFile(filepath.Join(fast, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	precious := t.TempDir()
	if err := os.WriteFile(filepath.Join(precious, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	bound := filepath.Join(root.Pod("bound"), "volume-subpaths", "x")
	if err := os.MkdirAll(bound, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(precious, bound, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })

	realBound, err := filepath.EvalSymlinks(bound)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveLeftovers(nil, root)
	if !slices.Equal(removed, []string{"memory"}) {
		t.Errorf("removed %q, want only the pod whose tmpfs could be unmounted", removed)
	}
	if err == nil || !strings.Contains(err.Error(), realBound+" is still a mount point") {
		t.Errorf("err = %v, want one naming the mount under the refused directory", err)
	}
	if _, err := os.Stat(root.Pod("memory")); !os.IsNotExist(err) {
		t.Errorf("pod dir with a memory emptyDir left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(precious, "keep")); err != nil {
		t.Errorf("a file behind a mount in a leftover directory was removed: %v", err)
	}
}

// A secret, projected or memory emptyDir volume's tmpfs is mounted noswap
// where the kernel has it (6.4): a Secret's value swapped out would be on a
// disk in clear. The kubelet's emptyDir (which its secret and projected
// plugins wrap) mounts it so (swap.IsTmpfsNoswapOptionSupported).
func TestMemoryVolumesAreNoswap(t *testing.T) {
	testroot.Require(t)
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil || major < 6 || major == 6 && minor < 4 {
		t.Skipf("kernel %s: tmpfs has no noswap before 6.4", unix.ByteSliceToString(u.Release[:]))
	}
	pod := mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  volumes:\n  - {name: fast, emptyDir: {medium: Memory}}\n  - {name: key, secret: {secretName: s, optional: true}}\n  - {name: both, projected: {sources: [{secret: {name: s, optional: true}}]}}\n  containers: [{name: c, image: i}]\n")
	root := poddir.Root(t.TempDir())
	uid := string(pod.UID)
	t.Cleanup(func() { _ = Remove(uid, root) })
	if err := Prepare(pod, root, manifest.Host{}); err != nil {
		t.Fatal(err)
	}
	infos, err := mountinfo.GetMounts(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root.EmptyDir(uid, "fast"), root.Secret(uid, "key"), root.Projected(uid, "both")} {
		i := slices.IndexFunc(infos, func(m *mountinfo.Info) bool { return m.Mountpoint == dir })
		if i < 0 {
			t.Errorf("%s: not mounted", dir)
			continue
		}
		if m := infos[i]; m.FSType != "tmpfs" || !slices.Contains(strings.Split(m.VFSOptions, ","), "noswap") {
			t.Errorf("%s: %s %s, want a tmpfs mounted noswap", dir, m.FSType, m.VFSOptions)
		}
	}
}
