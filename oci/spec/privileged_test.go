package spec

import (
	"reflect"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestWithPrivileged(t *testing.T) {
	all, err := currentCaps()
	if err != nil {
		t.Fatal(err)
	}
	s := Default()
	if err := WithPrivileged()(s); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{name: "bounding caps", got: s.Process.Capabilities.Bounding, want: all},
		{name: "effective caps", got: s.Process.Capabilities.Effective, want: all},
		{name: "masked paths", got: len(s.Linux.MaskedPaths), want: 0},
		{name: "readonly paths", got: len(s.Linux.ReadonlyPaths), want: 0},
		{name: "device cgroup", got: s.Linux.Resources.Devices, want: []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}},
		{name: "/sys read-only", got: slices.Contains(mountOptions(s, "/sys"), "ro"), want: false},
		{name: "/sys/fs/cgroup read-only", got: slices.Contains(mountOptions(s, "/sys/fs/cgroup"), "ro"), want: false},
		{name: "/dev/null present", got: hasDevice(s, "/dev/null"), want: true},
		{name: "no /dev/pts/* device", got: hasDevicePrefix(s, "/dev/pts/"), want: false},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	// Default() must not have been changed through shared slices.
	d := Default()
	if !slices.Contains(mountOptions(d, "/sys"), "ro") || len(d.Linux.MaskedPaths) == 0 {
		t.Error("WithPrivileged changed the defaults of later specs")
	}
}

func mountOptions(s *specs.Spec, dst string) []string {
	m, _ := findMount(s.Mounts, dst)
	return m.Options
}

func hasDevice(s *specs.Spec, path string) bool {
	return slices.ContainsFunc(s.Linux.Devices, func(d specs.LinuxDevice) bool { return d.Path == path })
}

func hasDevicePrefix(s *specs.Spec, prefix string) bool {
	return slices.ContainsFunc(s.Linux.Devices, func(d specs.LinuxDevice) bool {
		return len(d.Path) > len(prefix) && d.Path[:len(prefix)] == prefix
	})
}

func TestHostDevices(t *testing.T) {
	devs, err := hostDevices("/dev")
	if err != nil {
		t.Fatal(err)
	}
	var null *specs.LinuxDevice
	for i := range devs {
		if devs[i].Path == "/dev/null" {
			null = &devs[i]
		}
		if devs[i].Path == "/dev/console" {
			t.Errorf("/dev/console listed: containers get their own")
		}
	}
	if null == nil {
		t.Fatal("/dev/null not listed")
	}
	if null.Type != "c" || null.Major != 1 || null.Minor != 3 {
		t.Errorf("/dev/null = %s %d:%d, want c 1:3", null.Type, null.Major, null.Minor)
	}
}
