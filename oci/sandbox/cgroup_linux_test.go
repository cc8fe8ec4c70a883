//go:build linux && cgo

package sandbox

import (
	"maps"
	"testing"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
)

func TestParentSlice(t *testing.T) {
	for in, want := range map[string]string{
		"staticpodd-kubepods-pod1.slice": "staticpodd-kubepods.slice",
		"staticpodd-kubepods.slice":      "staticpodd.slice",
		"staticpodd.slice":               "-.slice",
	} {
		if got := parentSlice(in); got != want {
			t.Errorf("parentSlice(%q) = %q, want %q", in, got, want)
		}
	}
}

// A manager made with the hierarchies' mount points found once has the
// paths libcontainer finds itself, for the paths the daemon gives and the
// ones a hostile or careless path could give.
func TestCgroupManagerPaths(t *testing.T) {
	for _, p := range []string{
		"/staticpodd/kubepods/besteffort/pod1",
		"/staticpodd/kubepods/pod2/c1",
		"/a/../../b",
		"//x/./y/",
	} {
		cg := func() *cgroups.Cgroup {
			return &cgroups.Cgroup{Path: p, Resources: &cgroups.Resources{SkipDevices: true}}
		}
		want, err := manager.New(cg())
		if err != nil {
			t.Fatal(err)
		}
		got, err := newCgroupManager(cg())
		if err != nil {
			t.Fatal(err)
		}
		if w, g := want.GetPaths(), got.GetPaths(); !maps.Equal(w, g) {
			t.Errorf("%s: paths %v, libcontainer's %v", p, g, w)
		}
	}
}

func BenchmarkCgroupManager(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if _, err := newCgroupManager(&cgroups.Cgroup{Path: "/staticpodd/kubepods/pod1", Resources: &cgroups.Resources{SkipDevices: true}}); err != nil {
			b.Fatal(err)
		}
	}
}
