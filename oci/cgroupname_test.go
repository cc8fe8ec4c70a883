package oci

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

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

// The scope's stop properties are what libcontainer's specconv parses into
// systemd unit properties: TimeoutStopUSec the pod's grace period (at least
// the kubelet's 2s minimum, never 0, which systemd takes for no timeout),
// KillSignal the container's stop signal.
func TestScopeStopProperties(t *testing.T) {
	for _, tc := range []struct {
		grace   time.Duration
		sig     syscall.Signal
		timeout uint64
	}{
		{5 * time.Second, syscall.SIGTERM, 5_000_000},
		{0, syscall.SIGQUIT, 2_000_000},
		{90 * time.Minute, syscall.SIGINT, 5_400_000_000},
	} {
		props := scopeStopProperties(tc.grace, tc.sig)
		v, err := dbus.ParseVariant(props["org.systemd.property.TimeoutStopUSec"], dbus.Signature{})
		if err != nil || v.Value() != tc.timeout {
			t.Errorf("grace %v: TimeoutStopUSec %v (%v), want uint64 %d", tc.grace, v, err, tc.timeout)
		}
		v, err = dbus.ParseVariant(props["org.systemd.property.KillSignal"], dbus.Signature{})
		if err != nil || v.Value() != int32(tc.sig) {
			t.Errorf("signal %v: KillSignal %v (%v), want int32 %d", tc.sig, v, err, tc.sig)
		}
	}
}

// The order of a container's scope against others' is systemd's After= and
// Before=, lists of scope names that parse as D-Bus string arrays as
// libcontainer reads them; what is not a container ID names no unit.
func TestScopeOrderProperties(t *testing.T) {
	a, b := "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	props := scopeOrderProperties([]string{a, "../../etc", `"],["x`}, []string{b, ""})
	for prop, want := range map[string][]string{
		"After":  {"staticpodd-" + a + ".scope"},
		"Before": {"staticpodd-" + b + ".scope"},
	} {
		v, err := dbus.ParseVariant(props["org.systemd.property."+prop], dbus.Signature{})
		if got, ok := v.Value().([]string); err != nil || !ok || !slices.Equal(got, want) {
			t.Errorf("%s = %v (%v), want %q", prop, v, err, want)
		}
	}
	if props := scopeOrderProperties(nil, []string{"not-an-id"}); len(props) != 0 {
		t.Errorf("nothing to order against gives %v", props)
	}
}
