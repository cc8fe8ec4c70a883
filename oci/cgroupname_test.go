package oci

import "testing"

func TestPodCgroupsPath(t *testing.T) {
	const uid = "0d4f-11aa"
	for _, tc := range []struct {
		driver, root, want string
	}{
		{CgroupDriverCgroupfs, "/staticpodd", "/staticpodd/pod0d4f-11aa"},
		{CgroupDriverCgroupfs, "/", "/pod0d4f-11aa"},
		// The kubelet's names: {root..., kubepods, pod<uid>} joined with dashes.
		{CgroupDriverSystemd, "/staticpodd", "staticpodd-kubepods-pod0d4f_11aa.slice"},
		{CgroupDriverSystemd, "/", "kubepods-pod0d4f_11aa.slice"},
		{CgroupDriverSystemd, "", "kubepods-pod0d4f_11aa.slice"},
		{CgroupDriverSystemd, "edge.slice", "edge-kubepods-pod0d4f_11aa.slice"},
		{CgroupDriverSystemd, "/edge.slice/edge-pods.slice", "edge-pods-kubepods-pod0d4f_11aa.slice"},
		{CgroupDriverSystemd, "/a/b", "a-b-kubepods-pod0d4f_11aa.slice"},
	} {
		if got := podCgroupsPath(tc.driver, tc.root, uid); got != tc.want {
			t.Errorf("podCgroupsPath(%s, %q) = %q, want %q", tc.driver, tc.root, got, tc.want)
		}
	}
}

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

func TestContainerCgroupsPath(t *testing.T) {
	for _, tc := range []struct {
		pod, want string
		systemd   bool
	}{
		{"/staticpodd/pod1", "/staticpodd/pod1/c1", false},
		{"kubepods-pod1.slice", "kubepods-pod1.slice:staticpodd:c1", true},
	} {
		got := containerCgroupsPath(tc.pod, "c1")
		if got != tc.want {
			t.Errorf("containerCgroupsPath(%q) = %q, want %q", tc.pod, got, tc.want)
		}
		if isSystemdCgroupsPath(got) != tc.systemd || isSystemdCgroupsPath(tc.pod) != tc.systemd {
			t.Errorf("isSystemdCgroupsPath(%q or %q) != %v", tc.pod, got, tc.systemd)
		}
	}
	// A cgroupfs path that happens to end in .slice is still cgroupfs.
	if isSystemdCgroupsPath("/x.slice") {
		t.Error("/x.slice taken for systemd")
	}
}
