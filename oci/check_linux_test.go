//go:build linux && cgo

package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

func TestCheck(t *testing.T) {
	testroot.Require(t)
	root := "/staticpodd-check-test-" + randHex(4)
	t.Cleanup(func() { removeCgroupEverywhere(t, root) })
	if errs := Check(CheckConfig{CgroupRoot: root, CgroupDriver: "cgroupfs", FailSwapOn: true}); len(errs) != 0 {
		t.Fatalf("checks failed on this host: %v", errs)
	}
	for _, d := range cgroupDirs(t, root) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue // a hierarchy pods do not use
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "staticpodd-check-") {
				t.Errorf("probe cgroup %s/%s left behind", d, e.Name())
			}
		}
	}
	errs := Check(CheckConfig{CgroupRoot: "/cgroup.procs/pods", CgroupDriver: "systemd", FailSwapOn: true})
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`cgroup-driver: cgroupDriver is "systemd" but systemd is not running`,
		"cgroup-root: cgroupRoot /cgroup.procs/pods is not writable",
	}
	if len(got) != len(want) {
		t.Fatalf("errors %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d = %q, want it to start %q", i, got[i], want[i])
		}
	}
}

// The v2 rule on a fixture tree: a cgroup on the way to cgroupRoot that
// does not pass the controllers on and has processes of its own (a systemd
// unit without Delegate=yes) fails; one without processes is fine, the
// runtime enables them.
func TestCheckControllersV2(t *testing.T) {
	base := t.TempDir()
	write := func(rel, file, body string) {
		dir := filepath.Join(base, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".", "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
	write("system.slice", "cgroup.subtree_control", "memory pids\n")
	write("system.slice", "cgroup.procs", "")
	write("system.slice/unit.service", "cgroup.subtree_control", "")
	write("system.slice/unit.service", "cgroup.procs", "812\n")
	write("node", "cgroup.subtree_control", "memory\n")
	write("node", "cgroup.procs", "")
	for _, tc := range []struct {
		root, want string
	}{
		{"/staticpodd", ""},
		{"/node/pods", ""},
		{"/system.slice/unit.service/pods", "cgroup v2 controllers cpu, cpuset, memory, pids cannot be given to pod cgroups under /system.slice/unit.service: it has processes of its own"},
	} {
		err := checkControllersV2(base, CheckConfig{CgroupRoot: tc.root})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.root, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.root, err, tc.want)
		}
	}
	write(".", "cgroup.controllers", "cpu io memory\n")
	if err := checkControllersV2(base, CheckConfig{CgroupRoot: "/staticpodd"}); err == nil ||
		err.Error() != "cgroup v2 controllers cpuset, pids are not available on this host" {
		t.Errorf("host without cpuset and pids: %v", err)
	}
}
