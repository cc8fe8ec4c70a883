package sandbox

import "testing"

// A recorded cgroup path is taken only in a form some cgroupDriver and
// cgroupRoot give the pod (oci's podCgroupsPath): removing a cgroup kills
// every process in it.
func TestPodCgroupPath(t *testing.T) {
	for _, tc := range []struct {
		uid, path string
		ok        bool
	}{
		{"u1", "/kubepods/podu1", true},
		{"u1", "/podu1", true},
		{"u1", "kubepods/podu1", true}, // a relative cgroupRoot
		{"a-b", "/staticpodd/poda-b", true},
		{"a-b", "kubepods-poda_b.slice", true},
		{"a-b", "system-kubepods-poda_b.slice", true},
		{"u1", "/", false},
		{"u1", "", false},
		{"u1", "/kubepods/podu2", false},
		{"u1", "/kubepods/podu1/..", false},
		{"u1", "/kubepods/../podu1", false},
		{"u1", "../podu1", false},
		{"u1", "/kubepods//podu1", false},
		{"u1", "/kubepods/victim", false},
		{"u1", "system.slice", false},
		{"u1", "-.slice", false},
		{"a-b", "kubepods-poda-b.slice", false}, // not the kubelet's escaping
		{"u1", "kubepods-podu1.slice:cri:x", false},
		{"u1", "a/b-podu1.slice", false},
		{"u1", "podu1.slice", false},
	} {
		if got := podCgroupPath(tc.uid, tc.path); got != tc.ok {
			t.Errorf("podCgroupPath(%q, %q) = %v, want %v", tc.uid, tc.path, got, tc.ok)
		}
	}
}
