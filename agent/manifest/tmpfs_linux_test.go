package manifest

import (
	"os"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

func TestMemoryEmptyDirIsSizedTmpfs(t *testing.T) {
	testroot.Require(t)
	pod := mustParse(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  volumes: [{name: fast, emptyDir: {medium: Memory, sizeLimit: 8Mi}}]\n  containers: [{name: c, image: i}]\n")
	p := Paths{RootDir: t.TempDir(), PodLogsDir: t.TempDir()}
	dir := p.EmptyDir(string(pod.UID), "fast")
	t.Cleanup(func() { _ = unmountIfMounted(dir) })
	for range 2 {
		if err := PrepareVolumes(pod, p); err != nil {
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
	if err := RemoveVolumes(string(pod.UID), p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.PodDir(string(pod.UID))); !os.IsNotExist(err) {
		t.Errorf("pod dir left: %v", err)
	}
}
