package spec

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runc/libcontainer/configs/validate"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestWithRoot(t *testing.T) {
	tests := []struct {
		path     string
		readonly bool
		wantErr  string
	}{
		{path: "/var/lib/c/rootfs"},
		{path: "/r", readonly: true},
		{path: "rootfs", wantErr: "absolute"},
		{path: "", wantErr: "absolute"},
	}
	for _, tt := range tests {
		s := Default()
		err := WithRoot(tt.path, tt.readonly)(s)
		checkErr(t, err, tt.wantErr)
		if tt.wantErr == "" && (*s.Root != specs.Root{Path: tt.path, Readonly: tt.readonly}) {
			t.Errorf("root = %+v, want %s readonly=%v", *s.Root, tt.path, tt.readonly)
		}
	}
}

func TestWithHostname(t *testing.T) {
	for _, h := range []string{"web-node1", ""} {
		s := Default()
		s.Hostname = "before"
		if err := WithHostname(h)(s); err != nil {
			t.Fatal(err)
		}
		if s.Hostname != h {
			t.Errorf("hostname = %q, want %q", s.Hostname, h)
		}
	}
}

func TestWithAnnotations(t *testing.T) {
	tests := []struct {
		start, add, want map[string]string
	}{
		{add: map[string]string{"a": "1"}, want: map[string]string{"a": "1"}},
		{start: map[string]string{"a": "1", "b": "2"}, add: map[string]string{"a": "x", "c": ""}, want: map[string]string{"a": "x", "b": "2"}},
		{add: map[string]string{"c": ""}, want: nil},
	}
	for _, tt := range tests {
		s := Default()
		s.Annotations = tt.start
		if err := WithAnnotations(tt.add)(s); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.Annotations, tt.want) {
			t.Errorf("annotations = %v, want %v", s.Annotations, tt.want)
		}
	}
}

func testPod() *podspec.Pod {
	return &podspec.Pod{UID: "uid-1", Namespace: "default", Name: "web-node1", Hostname: "web"}
}

func testSandbox() Sandbox {
	return Sandbox{
		NetNS: "/run/staticpodd/netns/uid-1", IPCNS: "/run/staticpodd/ipcns/uid-1", UTSNS: "/run/staticpodd/utsns/uid-1",
		CgroupsPath:  "/staticpodd/poduid-1/c1",
		HostsFile:    "/run/staticpodd/pods/uid-1/hosts",
		HostnameFile: "/run/staticpodd/pods/uid-1/hostname",
	}
}

var busybox = imagespec.ImageConfig{Cmd: []string{"sh"}, Env: []string{"PATH=/bin:/usr/bin"}}

func TestGenerateCommandArgs(t *testing.T) {
	img := imagespec.ImageConfig{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"nginx", "-g", "daemon off;"}}
	tests := []struct {
		name          string
		command, args []string
		img           imagespec.ImageConfig
		want          []string
		wantErr       string
	}{
		{name: "image defaults", img: img, want: []string{"/docker-entrypoint.sh", "nginx", "-g", "daemon off;"}},
		{name: "args", args: []string{"nginx", "-T"}, img: img, want: []string{"/docker-entrypoint.sh", "nginx", "-T"}},
		{name: "command", command: []string{"/bin/sh", "-c"}, img: img, want: []string{"/bin/sh", "-c"}},
		{name: "command and args", command: []string{"/bin/sh", "-c"}, args: []string{"echo hi"}, img: img, want: []string{"/bin/sh", "-c", "echo hi"}},
		{name: "nothing to run", img: imagespec.ImageConfig{}, wantErr: `container "app" of pod web-node1: command`},
	}
	rootfs := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &podspec.Container{Name: "app", Command: tt.command, Args: tt.args}
			s, err := Generate(testPod(), c, tt.img, rootfs, testSandbox())
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && !reflect.DeepEqual(s.Process.Args, tt.want) {
				t.Errorf("args = %q, want %q", s.Process.Args, tt.want)
			}
		})
	}
}

func TestGenerateEnv(t *testing.T) {
	tests := []struct {
		name     string
		imageEnv []string
		podEnv   []podspec.EnvVar
		hostNet  bool
		want     []string
	}{
		{
			name:     "image then pod, overrides in place",
			imageEnv: []string{"PATH=/img/bin", "A=1", "B=2"},
			podEnv:   []podspec.EnvVar{{Name: "B", Value: "pod"}, {Name: "C", Value: "3"}, {Name: "A", Value: "pod"}},
			want:     []string{"PATH=/img/bin", "A=pod", "B=pod", "C=3", "HOSTNAME=web"},
		},
		{
			name: "defaults when absent",
			want: []string{"HOSTNAME=web", "PATH=" + DefaultPath},
		},
		{
			name:   "pod sets HOSTNAME and PATH",
			podEnv: []podspec.EnvVar{{Name: "HOSTNAME", Value: "mine"}, {Name: "PATH", Value: "/p"}},
			want:   []string{"HOSTNAME=mine", "PATH=/p"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &podspec.Container{Name: "app", Command: []string{"sh"}, Env: tt.podEnv}
			s, err := Generate(testPod(), c, imagespec.ImageConfig{Env: tt.imageEnv}, t.TempDir(), testSandbox())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Process.Env, tt.want) {
				t.Errorf("env = %q, want %q", s.Process.Env, tt.want)
			}
		})
	}
}

func TestGenerateEnvHostNetworkHostname(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod()
	pod.HostNetwork = true
	s, err := Generate(pod, &podspec.Container{Name: "app"}, busybox, t.TempDir(), Sandbox{IPCNS: "/x/ipc"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Process.Env, "HOSTNAME="+host) {
		t.Errorf("env %q lacks HOSTNAME=%s", s.Process.Env, host)
	}
}

func TestGenerateUser(t *testing.T) {
	rootfs := testRootfs(t)
	uid := int64(1)
	tests := []struct {
		name      string
		imageUser string
		runAs     *int64
		sup       []int64
		want      specs.User
	}{
		{name: "image user by name", imageUser: "app", want: specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 10, 29}}},
		{name: "runAsUser", imageUser: "app", runAs: &uid, sup: []int64{3000}, want: specs.User{UID: 1, GID: 1, AdditionalGids: []uint32{1, 3000}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &podspec.Container{Name: "app", Security: podspec.Security{RunAsUser: tt.runAs, SupplementalGroups: tt.sup}}
			img := busybox
			img.User = tt.imageUser
			s, err := Generate(testPod(), c, img, rootfs, testSandbox())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Process.User, tt.want) {
				t.Errorf("user = %+v, want %+v", s.Process.User, tt.want)
			}
		})
	}
	_, err := Generate(testPod(), &podspec.Container{Name: "app"}, imagespec.ImageConfig{Cmd: []string{"sh"}, User: "ghost"}, rootfs, testSandbox())
	checkErr(t, err, `container "app" of pod web-node1: image User "ghost"`)
}

func TestGeneratePrivilegedVsDefault(t *testing.T) {
	all, err := currentCaps()
	if err != nil {
		t.Fatal(err)
	}
	rootfs := t.TempDir()
	def, err := Generate(testPod(), &podspec.Container{Name: "app", Security: podspec.Security{CapAdd: []string{"ALL"}}}, busybox, rootfs, testSandbox())
	if err != nil {
		t.Fatal(err)
	}
	priv, err := Generate(testPod(), &podspec.Container{Name: "app", Security: podspec.Security{Privileged: true, CapDrop: []string{"ALL"}}}, busybox, rootfs, testSandbox())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Generate(testPod(), &podspec.Container{Name: "app"}, busybox, rootfs, testSandbox())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"default caps", plain.Process.Capabilities.Bounding, DefaultCapabilities},
		{"default masked paths", plain.Linux.MaskedPaths, DefaultMaskedPaths},
		{"default readonly paths", plain.Linux.ReadonlyPaths, DefaultReadonlyPaths},
		{"default /sys ro", slices.Contains(mountOptions(plain, "/sys"), "ro"), true},
		{"default devices cgroup denies first", plain.Linux.Resources.Devices[0], specs.LinuxDeviceCgroup{Allow: false, Access: "rwm"}},
		{"default device nodes", len(plain.Linux.Devices), len(defaultDevices())},
		{"capAdd ALL is all caps", sameSet(def.Process.Capabilities.Bounding, all), true},
		{"capAdd ALL still masks", def.Linux.MaskedPaths, DefaultMaskedPaths},
		{"privileged ignores capDrop", sameSet(priv.Process.Capabilities.Bounding, all), true},
		{"privileged no masked paths", len(priv.Linux.MaskedPaths), 0},
		{"privileged /sys rw", slices.Contains(mountOptions(priv, "/sys"), "ro"), false},
		{"privileged allows all devices", priv.Linux.Resources.Devices, []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}},
		{"privileged has host devices", len(priv.Linux.Devices) > len(defaultDevices()), true},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func nsTypes(s *specs.Spec) map[specs.LinuxNamespaceType]string {
	m := map[specs.LinuxNamespaceType]string{}
	for _, n := range s.Linux.Namespaces {
		m[n.Type] = n.Path
	}
	return m
}

func TestGenerateHostNetworkVsPod(t *testing.T) {
	rootfs := t.TempDir()
	sb := testSandbox()
	podNet, err := Generate(testPod(), &podspec.Container{Name: "app"}, busybox, rootfs, sb)
	if err != nil {
		t.Fatal(err)
	}
	hostPod := testPod()
	hostPod.HostNetwork = true
	hostSB := sb
	hostSB.NetNS, hostSB.UTSNS = "", ""
	hostNet, err := Generate(hostPod, &podspec.Container{Name: "app"}, busybox, rootfs, hostSB)
	if err != nil {
		t.Fatal(err)
	}

	pn, hn := nsTypes(podNet), nsTypes(hostNet)
	if pn[specs.NetworkNamespace] != sb.NetNS || pn[specs.UTSNamespace] != sb.UTSNS || pn[specs.IPCNamespace] != sb.IPCNS {
		t.Errorf("pod namespaces = %v, want the sandbox's", pn)
	}
	if podNet.Hostname != "web" {
		t.Errorf("pod hostname = %q, want web", podNet.Hostname)
	}
	if _, ok := hn[specs.NetworkNamespace]; ok {
		t.Errorf("hostNetwork: has a network namespace: %v", hn)
	}
	if _, ok := hn[specs.UTSNamespace]; ok {
		t.Errorf("hostNetwork: has a UTS namespace: %v", hn)
	}
	if hn[specs.IPCNamespace] != sb.IPCNS {
		t.Errorf("hostNetwork: IPC = %q, want the pod's %q", hn[specs.IPCNamespace], sb.IPCNS)
	}
	if hostNet.Hostname != "" {
		t.Errorf("hostNetwork: hostname = %q, want the host's (unset)", hostNet.Hostname)
	}
	for _, s := range []*specs.Spec{podNet, hostNet} {
		if _, ok := nsTypes(s)[specs.PIDNamespace]; !ok {
			t.Error("no pid namespace without hostPID")
		}
	}
}

func TestGenerateRlimitClamp(t *testing.T) {
	hard := ownNofileHard(t)
	s, err := Generate(testPod(), &podspec.Container{Name: "app"}, busybox, t.TempDir(), testSandbox())
	if err != nil {
		t.Fatal(err)
	}
	var nofile *specs.POSIXRlimit
	for i, r := range s.Process.Rlimits {
		if r.Type == "RLIMIT_NOFILE" {
			nofile = &s.Process.Rlimits[i]
		}
	}
	if nofile == nil {
		t.Fatal("no RLIMIT_NOFILE")
	}
	want := min(uint64(maxNofile), hard)
	if nofile.Hard > hard || nofile.Soft > nofile.Hard {
		t.Errorf("RLIMIT_NOFILE %d/%d exceeds own hard limit %d", nofile.Soft, nofile.Hard, hard)
	}
	if nofile.Hard != want || nofile.Soft != want {
		t.Errorf("RLIMIT_NOFILE = %d/%d, want %d", nofile.Soft, nofile.Hard, want)
	}
}

func TestGenerateMisc(t *testing.T) {
	rootfs := t.TempDir()
	c := &podspec.Container{
		Name: "app", WorkingDir: "/srv", Hash: "abc", Attempt: 2,
		Security:  podspec.Security{ReadOnlyRootFilesystem: true, NoNewPrivileges: true},
		Resources: podspec.Resources{MemoryLimit: 1 << 27, PidsLimit: 64},
		Mounts:    []podspec.Mount{{Destination: "/data", Type: "bind", Source: "/var/lib/x", ReadOnly: true}},
	}
	s, err := Generate(testPod(), c, busybox, rootfs, testSandbox())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"root", *s.Root, specs.Root{Path: rootfs, Readonly: true}},
		{"cwd", s.Process.Cwd, "/srv"},
		{"no_new_privs", s.Process.NoNewPrivileges, true},
		{"terminal", s.Process.Terminal, false},
		{"cgroups path", s.Linux.CgroupsPath, "/staticpodd/poduid-1/c1"},
		{"memory", *s.Linux.Resources.Memory.Limit, int64(1 << 27)},
		{"swap", *s.Linux.Resources.Memory.Swap, int64(1 << 27)},
		{"pids", *s.Linux.Resources.Pids.Limit, int64(64)},
		{"/etc/hosts ro", mountOptions(s, "/etc/hosts"), []string{"rbind", "rprivate", "ro"}},
		{"/data", mountOptions(s, "/data"), []string{"rbind", "rprivate", "ro"}},
		{"no resolv.conf", mountOptions(s, "/etc/resolv.conf"), []string(nil)},
		{"seccomp", s.Linux.Seccomp, (*specs.LinuxSeccomp)(nil)},
		{"annotation uid", s.Annotations[AnnotationPodUID], "uid-1"},
		{"annotation restart", s.Annotations[AnnotationRestartCount], "2"},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if _, err := Generate(testPod(), &podspec.Container{Name: "app"}, busybox, "rel", testSandbox()); err == nil || !strings.Contains(err.Error(), `container "app"`) {
		t.Errorf("relative rootfs: err = %v, want one naming the container", err)
	}
}

// Every spec Generate makes must be one libcontainer accepts: converted by specconv
// and passing libcontainer's own validation, as runc does before creating.
func TestGenerateLibcontainerAccepts(t *testing.T) {
	rootfs, err := filepath.EvalSymlinks(testRootfs(t))
	if err != nil {
		t.Fatal(err)
	}
	uid := int64(1000)
	cases := map[string]struct {
		pod func(*podspec.Pod)
		c   podspec.Container
		sb  func(*Sandbox)
	}{
		"default": {},
		"privileged": {
			c: podspec.Container{Security: podspec.Security{Privileged: true}},
		},
		"hostNetwork": {
			pod: func(p *podspec.Pod) { p.HostNetwork = true },
			sb:  func(s *Sandbox) { s.NetNS, s.UTSNS = "", "" },
		},
		"all host namespaces": {
			pod: func(p *podspec.Pod) { p.HostNetwork, p.HostIPC, p.HostPID = true, true, true },
			sb:  func(s *Sandbox) { *s = Sandbox{CgroupsPath: s.CgroupsPath} },
		},
		"everything set": {
			c: podspec.Container{
				WorkingDir: "/tmp",
				Env:        []podspec.EnvVar{{Name: "A", Value: "1"}},
				Mounts: []podspec.Mount{
					{Destination: "/data", Type: "bind", Source: "/var/lib", ReadOnly: true},
					{Destination: "/cache", Type: "tmpfs", Source: "tmpfs", Options: []string{"size=64m", "mode=1777"}},
					{Destination: "/dev/shm", Type: "tmpfs", Source: "tmpfs", Options: []string{"size=128m"}},
				},
				Resources: podspec.Resources{MemoryLimit: 1 << 28, CPUShares: 512, CPUQuota: 50000, PidsLimit: 100},
				Security: podspec.Security{
					RunAsUser: &uid, SupplementalGroups: []int64{5}, ReadOnlyRootFilesystem: true,
					NoNewPrivileges: true, CapAdd: []string{"NET_ADMIN"}, CapDrop: []string{"CAP_NET_RAW"},
				},
			},
			sb: func(s *Sandbox) { s.ResolvConfFile = "/etc/resolv.conf" },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := testPod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			sb := testSandbox()
			if tc.sb != nil {
				tc.sb(&sb)
			}
			c := tc.c
			c.Name = "app"
			s, err := Generate(pod, &c, busybox, rootfs, sb)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
				CgroupName: "", UseSystemdCgroup: false, NoPivotRoot: false, Spec: s,
			})
			if err != nil {
				t.Fatalf("specconv refuses the spec: %v", err)
			}
			if err := validate.Validate(cfg); err != nil {
				t.Fatalf("libcontainer refuses the config: %v", err)
			}
			if cfg.Rootfs != rootfs || cfg.Cgroups.Path != sb.CgroupsPath {
				t.Errorf("config rootfs %q cgroup %q, want %q %q", cfg.Rootfs, cfg.Cgroups.Path, rootfs, sb.CgroupsPath)
			}
		})
	}
}
