//go:build linux && cgo

package oci

import (
	"os"
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
