package config

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

// kubeletLoad parses args as the kubelet personality's command line (with
// --root-dir and --run-dir, which the root command declares for every
// subcommand) and loads the configuration they give.
func kubeletLoad(t *testing.T, args ...string) (*Config, []string, []string, error) {
	t.Helper()
	fs := pflag.NewFlagSet(KubeletName, pflag.ContinueOnError)
	fs.String(FlagRootDir, DefaultRootDir, "")
	fs.String(FlagRunDir, DefaultRunDir, "")
	var kf KubeletFlags
	kf.Register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, nil, err
	}
	flags, notes, err := kf.Resolve()
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, warnings, err := Load(flags.ConfigFile, flags)
	return cfg, notes, warnings, err
}

// kubeadmFlagsEnv is KUBELET_KUBEADM_ARGS of a kubeadm-flags.env as
// systemd's EnvironmentFile= reads it and $KUBELET_KUBEADM_ARGS splits it.
func kubeadmFlagsEnv(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "KUBELET_KUBEADM_ARGS=")
	if !ok {
		t.Fatalf("%s: no KUBELET_KUBEADM_ARGS=: %q", path, b)
	}
	if v, err = strconv.Unquote(v); err != nil {
		t.Fatal(err)
	}
	return strings.Fields(v)
}

// What kubeadm v1.37.2 writes, with the command line of its kubelet.service
// drop-in (10-kubeadm.conf), loads with no error and warns only about the
// fields staticpodd does not honour.
func TestKubeletPersonalityLoadsKubeadmFiles(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubelet.conf") // kubeadm init writes it before kubelet-start
	if err := os.WriteFile(kubeconfig, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=" + kubeconfig,
		"--config=testdata/kubeadm/config.yaml",
	}, kubeadmFlagsEnv(t, "testdata/kubeadm/kubeadm-flags.env")...)
	cfg, notes, warnings, err := kubeletLoad(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	file, _ := filepath.Abs("testdata/kubeadm/config.yaml")
	wantWarnings := []string{
		"config " + file + ": clusterDNS is set but staticpodd ignores it",
		"config " + file + ": clusterDomain is set but staticpodd ignores it",
	}
	if !slices.Equal(warnings, wantWarnings) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(wantWarnings, "\n"))
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "--pod-infra-container-image=registry.k8s.io/pause:3.10 is ignored: staticpodd has no pause container") {
		t.Errorf("notes = %q, want the pause image's", notes)
	}
	for key, want := range map[string]string{
		"nodeName": "cp-1", "nodeIP": "10.0.0.5", "nodeLabels": "role=cp", "kubeconfig": kubeconfig,
		"staticPodPath": "/etc/kubernetes/manifests", "healthzPort": "10248", "healthzBindAddress": "127.0.0.1",
		"containerRuntimeEndpoint": "unix:///run/staticpodd/cri.sock", "cgroupDriver": "systemd",
		"authentication.x509.clientCAFile": "/etc/kubernetes/pki/ca.crt", "authorization.mode": "Webhook",
		"authentication.anonymous.enabled": "false", "authentication.webhook.enabled": "true",
		"certDir": DefaultKubeletCertDir, "fileCheckFrequency": "20s", "rootDir": DefaultRootDir,
	} {
		if got := show(cfg, key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if o := cfg.Origin("nodeLabels"); o != "flag --node-labels" {
		t.Errorf("nodeLabels from %q", o)
	}
	if o := cfg.Origin("certDir"); o != "default (kubelet)" {
		t.Errorf("certDir from %q", o)
	}
}

func show(c *Config, key string) string {
	for _, e := range c.Entries() {
		if e.Key == key {
			return e.Value
		}
	}
	return "(no such key)"
}

// The kubelet's flags of file fields win over the file, as in the kubelet,
// and say so; relative paths are the working directory's.
func TestKubeletFlagsOverrideTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"healthzPort: 10248\nmaxPods: 20\ntlsCertFile: tls.crt\ntlsPrivateKeyFile: tls.key\nauthentication:\n  x509:\n    clientCAFile: ca.crt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cwd, _ := os.Getwd()
	cfg, _, warnings, err := kubeletLoad(t, "--config", path, "--hostname-override=n",
		"--healthz-port=0", "--max-pods", "30", "--tls-cert-file=other.crt", "--anonymous-auth",
		"--register-with-taints=a=b:NoSchedule,c:NoExecute", "--eviction-hard=memory.available<5%",
		"--cgroup-driver=cgroupfs", "--cluster-dns=10.96.0.10", "--feature-gates=Foo=true",
		"--allowed-unsafe-sysctls=net.core.somaxconn", "--allowed-unsafe-sysctls=kernel.msg*",
		"--eviction-soft=memory.available<1Gi", "--eviction-soft=memory.available<2Gi,nodefs.available<5%",
		"--eviction-soft-grace-period=memory.available=1m,nodefs.available=1m",
		"--node-labels=a=1", "--node-labels=b=2,c")
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"healthzPort": "0", "maxPods": "30", "authentication.anonymous.enabled": "true", "cgroupDriver": "cgroupfs",
		"tlsCertFile": filepath.Join(cwd, "other.crt"), "tlsPrivateKeyFile": filepath.Join(dir, "tls.key"),
		"authentication.x509.clientCAFile": filepath.Join(dir, "ca.crt"),
		"registerWithTaints":               "a=b:NoSchedule,c:NoExecute", "evictionHard": "memory.available=5%",
		"nodeLabels": "a=1,b=2,c=",
		// Repeated, lists add up and maps merge, a later key winning.
		"allowedUnsafeSysctls": "net.core.somaxconn,kernel.msg*",
		"evictionSoft":         "memory.available=2Gi,nodefs.available=5%",
	} {
		if got := show(cfg, key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	for key, flag := range map[string]string{"healthzPort": "healthz-port", "maxPods": "max-pods", "registerWithTaints": "register-with-taints", "tlsPrivateKeyFile": ""} {
		want := "flag --" + flag
		if flag == "" {
			want = "file " + path
		}
		if o := cfg.Origin(key); o != want {
			t.Errorf("%s from %q, want %q", key, o, want)
		}
	}
	want := []string{
		"--cluster-dns (clusterDNS) is set but staticpodd ignores it",
		"--feature-gates (featureGates) is set but staticpodd ignores it",
	}
	if !slices.Equal(warnings, want) {
		t.Errorf("warnings = %q, want %q", warnings, want)
	}
	if cfg.RegisterWithTaints[1] != (v1.Taint{Key: "c", Effect: v1.TaintEffectNoExecute}) {
		t.Errorf("taints = %+v", cfg.RegisterWithTaints)
	}

	// Without a file, the flags alone.
	cfg, _, _, err = kubeletLoad(t, "--hostname-override=n", "--read-only-port=10255")
	if err != nil || cfg.ReadOnlyPort != 10255 || cfg.ConfigFile != "" {
		t.Errorf("flags alone: %+v, %v", cfg, err)
	}
}

// What staticpodd cannot do fails the start, naming the flag and why.
func TestKubeletFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--container-runtime-endpoint=unix:///run/containerd/containerd.sock"},
			`containerRuntimeEndpoint: "unix:///run/containerd/containerd.sock": staticpodd is the container runtime, and serves the CRI at unix:///run/staticpodd/cri.sock`},
		{[]string{"--image-service-endpoint=tcp://1.2.3.4:5"}, `imageServiceEndpoint: "tcp://1.2.3.4:5": staticpodd is the container runtime`},
		{[]string{"--run-dir=/run/x", "--container-runtime-endpoint=unix:///run/staticpodd/cri.sock"}, "serves the CRI at unix:///run/x/cri.sock"},
		{[]string{"--cloud-provider=external"}, "--cloud-provider=external: staticpodd has no cloud provider integration"},
		{[]string{"--config-dir=/etc/kubernetes/kubelet.conf.d"}, "--config-dir=/etc/kubernetes/kubelet.conf.d: drop-in directories"},
		{[]string{"--container-runtime=remote"}, "unknown flag: --container-runtime"},
		{[]string{"--runonce"}, "--runonce=true: use `staticpodd run --once`"},
		{[]string{"--max-pods=many"}, `invalid argument "many" for --max-pods`},
		{[]string{"--register-with-taints=a=b:Sometimes"}, `invalid taint effect "Sometimes"`},
		{[]string{"--node-labels=node-role.kubernetes.io/control-plane="}, "unknown 'kubernetes.io' or 'k8s.io' labels [node-role.kubernetes.io/control-plane]"},
		{[]string{"--node-labels=a b=c"}, `nodeLabels: "a b"`},
		{[]string{"--version=raw"}, `invalid argument "raw" for --version`},
		{[]string{"--bootstrap-kubeconfig=/b.conf"}, "bootstrapKubeconfig: needs --kubeconfig"},
	} {
		_, _, _, err := kubeletLoad(t, append(c.args, "--hostname-override=n")...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
	// Allowed ones: those a kubelet may set on its own Node.
	if _, _, _, err := kubeletLoad(t, "--hostname-override=n", "--node-labels=node.kubernetes.io/exclude-from-external-load-balancers=,kubernetes.io/os=linux"); err != nil {
		t.Error(err)
	}
	if _, _, _, err := kubeletLoad(t, "--hostname-override=n", "--runonce=false", "--cloud-provider="); err != nil {
		t.Error(err)
	}
	// A plain path is a unix socket's, as the kubelet takes it.
	if _, _, _, err := kubeletLoad(t, "--hostname-override=n", "--container-runtime-endpoint=/run/staticpodd/cri.sock"); err != nil {
		t.Error(err)
	}
}

// Every kubelet flag of a file field names a field of the
// KubeletConfiguration, with its type.
func TestKubeletFileFlagsNameFields(t *testing.T) {
	sample := map[flagKind]string{
		kindString: "x", kindPath: "/x", kindInt: "1", kindBool: "true", kindDuration: "1m",
		kindList: "a,b", kindMap: "a=b", kindMapLess: "memory.available<1Mi", kindMapBool: "A=true", kindTaints: "a=b:NoSchedule",
	}
	for _, ff := range kubeletFileFlags {
		_, _, _, err := kubeletLoad(t, "--hostname-override=n", "--"+ff.flag+"="+sample[ff.kind])
		if err != nil && (strings.Contains(err.Error(), "unknown field") || strings.Contains(err.Error(), "cannot unmarshal")) {
			t.Errorf("--%s (%s): %v", ff.flag, ff.field, err)
		}
	}
}

// Before kubeadm has written --config's file, the kubelet personality loads
// with it missing and turns off all that needs it (kubeadm's preflight calls
// the CRI first); the run command, and a file that is there but bad, still
// fail.
func TestKubeletPersonalityWithoutItsConfigYet(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "config.yaml")
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	if err := os.WriteFile(kubeconfig, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, _, err := kubeletLoad(t, "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig="+kubeconfig,
		"--config="+missing, "--node-labels=role=cp", "--pod-manifest-path="+dir, "--healthz-port=10248")
	if err != nil {
		t.Fatal(err)
	}
	off := "off: --config " + missing + " is not there yet"
	for key, want := range map[string]string{
		"missingConfig": missing, "configFile": "", "staticPodPath": "", "staticPodURL": "", "kubeconfig": "",
		"bootstrapKubeconfig": "", "healthzPort": "0", "readOnlyPort": "0", "nodeLabels": "role=cp",
		"containerRuntimeEndpoint": "unix:///run/staticpodd/cri.sock",
	} {
		got := show(cfg, key)
		if want == "" || want == "0" {
			if o := cfg.Origin(key); key != "configFile" && key != "missingConfig" && o != off {
				t.Errorf("%s from %q, want %q", key, o, off)
			}
			if got == "-" {
				got = ""
			}
		}
		if got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}

	// Run's --config names a file the admin wrote: missing is an error.
	if _, _, err := Load(missing, Flags{ConfigFile: missing}); err == nil {
		t.Error("staticpodd run loaded a missing --config")
	}
	// A file that is there is read as always, errors and all.
	if err := os.WriteFile(missing, []byte("kind: Pod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := kubeletLoad(t, "--config="+missing); err == nil {
		t.Error("a bad --config file loaded")
	}
}
