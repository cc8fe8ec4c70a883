package oci

import "testing"

func TestCgroupFSPath(t *testing.T) {
	pod := podCgroupsPath(CgroupDriverSystemd, "/staticpodd", "0123abcd")
	for _, c := range []struct{ in, want string }{
		{"/staticpodd/pod0123abcd", "/staticpodd/pod0123abcd"},
		{"/staticpodd/pod0123abcd/c1", "/staticpodd/pod0123abcd/c1"},
		{pod, "/staticpodd.slice/staticpodd-kubepods.slice/staticpodd-kubepods-pod0123abcd.slice"},
		{containerCgroupsPath(pod, "c1"), "/staticpodd.slice/staticpodd-kubepods.slice/staticpodd-kubepods-pod0123abcd.slice/staticpodd-c1.scope"},
	} {
		if got := cgroupFSPath(c.in); got != c.want {
			t.Errorf("cgroupFSPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := rootFSPath(CgroupDriverSystemd, "/staticpodd"); got != "/staticpodd.slice" {
		t.Errorf("rootFSPath(systemd, /staticpodd) = %q", got)
	}
	if got := rootFSPath(CgroupDriverCgroupfs, "/staticpodd"); got != "/staticpodd" {
		t.Errorf("rootFSPath(cgroupfs, /staticpodd) = %q", got)
	}
}
