package spec

import (
	"reflect"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func destinations(ms []specs.Mount) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Destination)
	}
	return out
}

func findMount(ms []specs.Mount, dst string) (specs.Mount, bool) {
	for _, m := range ms {
		if m.Destination == dst {
			return m, true
		}
	}
	return specs.Mount{}, false
}

func TestWithMounts(t *testing.T) {
	defaults := destinations(defaultMounts())
	tests := []struct {
		name      string
		mounts    []podspec.Mount
		wantDsts  []string
		wantMount *specs.Mount // checked by its destination
		wantErr   string
	}{
		{
			name:      "bind rw",
			mounts:    []podspec.Mount{{Destination: "/data", Type: "bind", Source: "/srv/data"}},
			wantDsts:  slices.Concat(defaults, []string{"/data"}),
			wantMount: &specs.Mount{Destination: "/data", Type: "bind", Source: "/srv/data", Options: []string{"rbind", "rprivate", "rw"}},
		},
		{
			name:      "bind ro",
			mounts:    []podspec.Mount{{Destination: "/cfg/", Type: "bind", Source: "/etc/app", ReadOnly: true}},
			wantDsts:  slices.Concat(defaults, []string{"/cfg"}),
			wantMount: &specs.Mount{Destination: "/cfg", Type: "bind", Source: "/etc/app", Options: []string{"rbind", "rprivate", "ro"}},
		},
		{
			name:      "tmpfs with options",
			mounts:    []podspec.Mount{{Destination: "/cache", Type: "tmpfs", Source: "tmpfs", Options: []string{"size=64m"}}},
			wantDsts:  slices.Concat(defaults, []string{"/cache"}),
			wantMount: &specs.Mount{Destination: "/cache", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "rw", "size=64m"}},
		},
		{
			name:      "user mount replaces a default",
			mounts:    []podspec.Mount{{Destination: "/dev/shm", Type: "tmpfs", Source: "tmpfs", Options: []string{"size=1g"}}},
			wantDsts:  []string{"/proc", "/dev", "/dev/pts", "/dev/mqueue", "/sys", "/sys/fs/cgroup", "/dev/shm"},
			wantMount: &specs.Mount{Destination: "/dev/shm", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "rw", "size=1g"}},
		},
		{
			name:     "a /dev mount replaces everything under /dev",
			mounts:   []podspec.Mount{{Destination: "/dev", Type: "bind", Source: "/dev"}},
			wantDsts: []string{"/proc", "/sys", "/sys/fs/cgroup", "/dev"},
		},
		{
			name: "parents before children, last of one destination wins",
			mounts: []podspec.Mount{
				{Destination: "/a/b", Type: "bind", Source: "/x"},
				{Destination: "/a", Type: "bind", Source: "/y"},
				{Destination: "/a/b", Type: "bind", Source: "/z"},
			},
			wantDsts:  slices.Concat(defaults, []string{"/a", "/a/b"}),
			wantMount: &specs.Mount{Destination: "/a/b", Type: "bind", Source: "/z", Options: []string{"rbind", "rprivate", "rw"}},
		},
		{name: "relative destination", mounts: []podspec.Mount{{Destination: "data", Type: "bind", Source: "/x"}}, wantErr: "mounts[0] (data): destination"},
		{name: "relative bind source", mounts: []podspec.Mount{{Destination: "/d", Type: "bind", Source: "x"}}, wantErr: "mounts[0] (/d): source"},
		{name: "unknown type", mounts: []podspec.Mount{{Destination: "/d", Type: "nfs", Source: "/x"}}, wantErr: `type "nfs"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			err := WithMounts(tt.mounts)(s)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			if got := destinations(s.Mounts); !reflect.DeepEqual(got, tt.wantDsts) {
				t.Errorf("destinations = %q, want %q", got, tt.wantDsts)
			}
			if tt.wantMount != nil {
				got, _ := findMount(s.Mounts, tt.wantMount.Destination)
				if !reflect.DeepEqual(got, *tt.wantMount) {
					t.Errorf("mount = %+v, want %+v", got, *tt.wantMount)
				}
			}
		})
	}
}

func TestWithSandboxFiles(t *testing.T) {
	tests := []struct {
		name     string
		sb       Sandbox
		readonly bool
		want     []specs.Mount
		wantErr  string
	}{
		{name: "none", sb: Sandbox{}},
		{
			name: "all three",
			sb:   Sandbox{HostsFile: "/p/hosts", HostnameFile: "/p/hostname", ResolvConfFile: "/p/resolv.conf"},
			want: []specs.Mount{
				{Destination: "/etc/hosts", Type: "bind", Source: "/p/hosts", Options: []string{"rbind", "rprivate", "rw"}},
				{Destination: "/etc/hostname", Type: "bind", Source: "/p/hostname", Options: []string{"rbind", "rprivate", "rw"}},
				{Destination: "/etc/resolv.conf", Type: "bind", Source: "/p/resolv.conf", Options: []string{"rbind", "rprivate", "rw"}},
			},
		},
		{
			name:     "read-only rootfs",
			sb:       Sandbox{HostsFile: "/p/hosts"},
			readonly: true,
			want:     []specs.Mount{{Destination: "/etc/hosts", Type: "bind", Source: "/p/hosts", Options: []string{"rbind", "rprivate", "ro"}}},
		},
		{name: "relative", sb: Sandbox{ResolvConfFile: "resolv.conf"}, wantErr: "ResolvConfFile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			err := WithSandboxFiles(tt.sb, tt.readonly)(s)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			if got := s.Mounts[len(defaultMounts()):]; !reflect.DeepEqual(got, tt.want) && len(got)+len(tt.want) > 0 {
				t.Errorf("added mounts = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A user's volume at /etc/hosts wins over the sandbox's file.
func TestUserMountOverridesSandboxFile(t *testing.T) {
	s := Default()
	err := apply(s,
		WithSandboxFiles(Sandbox{HostsFile: "/p/hosts"}, false),
		WithMounts([]podspec.Mount{{Destination: "/etc/hosts", Type: "bind", Source: "/mine/hosts", ReadOnly: true}}),
	)
	if err != nil {
		t.Fatal(err)
	}
	var got []specs.Mount
	for _, m := range s.Mounts {
		if m.Destination == "/etc/hosts" {
			got = append(got, m)
		}
	}
	if len(got) != 1 || got[0].Source != "/mine/hosts" {
		t.Errorf("/etc/hosts mounts = %+v, want only the user's", got)
	}
}

func TestWithSandboxShm(t *testing.T) {
	shmMounts := func(s *specs.Spec) []specs.Mount {
		var out []specs.Mount
		for _, m := range s.Mounts {
			if m.Destination == "/dev/shm" {
				out = append(out, m)
			}
		}
		return out
	}
	def := shmMounts(Default())
	tests := []struct {
		name    string
		shm     string
		want    []specs.Mount
		wantErr string
	}{
		{name: "none keeps the container's own tmpfs", want: def},
		{
			name: "pod's",
			shm:  "/run/p/shm",
			want: []specs.Mount{{Destination: "/dev/shm", Type: "bind", Source: "/run/p/shm",
				Options: []string{"rbind", "rprivate", "rw", "nosuid", "nodev", "noexec"}}},
		},
		{name: "relative", shm: "shm", wantErr: "ShmPath"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			err := WithSandboxShm(tt.shm)(s)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			if got := shmMounts(s); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("/dev/shm mounts = %+v, want %+v", got, tt.want)
			}
		})
	}
}
