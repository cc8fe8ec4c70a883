package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadSeed(t *testing.T) {
	c, warnings, err := Load("testdata/seed.yaml", Flags{HostnameOverride: "Node-A"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}
	abs, _ := filepath.Abs("testdata/seed.yaml")
	file := "file " + abs
	checks := []struct {
		key, got, want, origin string
	}{
		{"address", c.Address, "192.168.0.8", file},
		{"staticPodPath", c.StaticPodPath, "/tmp/test_pod.yaml", file},
		{"nodeName", c.NodeName, "node-a", "flag --hostname-override"},
		{"podLogsDir", c.PodLogsDir, "/var/log/pods", OriginDefault},
		{"cgroupRoot", c.CgroupRoot, "/staticpodd", OriginDefault},
		{"rootDir", c.RootDir, DefaultRootDir, OriginDefault},
	}
	for _, ck := range checks {
		if ck.got != ck.want || c.Origin(ck.key) != ck.origin {
			t.Errorf("%s = %q from %q, want %q from %q", ck.key, ck.got, c.Origin(ck.key), ck.want, ck.origin)
		}
	}
	if c.Port != 20250 || c.Origin("port") != file {
		t.Errorf("port = %d from %q", c.Port, c.Origin("port"))
	}
	if c.SerializeImagePulls {
		t.Error("serializeImagePulls = true, want false from the file")
	}
	if len(c.EvictionHard) != 1 || c.EvictionHard["memory.available"] != "200Mi" {
		t.Errorf("evictionHard = %v, want only memory.available=200Mi", c.EvictionHard)
	}
	if c.FileCheckFrequency != 20*time.Second || c.HTTPCheckFrequency != 20*time.Second || c.SyncFrequency != time.Minute {
		t.Errorf("frequencies = %v %v %v", c.FileCheckFrequency, c.HTTPCheckFrequency, c.SyncFrequency)
	}
	if c.ReadOnlyPort != 0 || c.ContainerLogMaxSize != 10<<20 || c.ContainerLogMaxFiles != 5 || c.MaxPods != 110 {
		t.Errorf("readOnlyPort %d, containerLogMaxSize %d, containerLogMaxFiles %d, maxPods %d",
			c.ReadOnlyPort, c.ContainerLogMaxSize, c.ContainerLogMaxFiles, c.MaxPods)
	}
	for _, e := range c.Entries() {
		if e.Origin == "" {
			t.Errorf("entry %s has no origin", e.Key)
		}
	}
}

// TestCgroupDriverFollowsInit: an unset cgroupDriver is systemd where systemd
// is init and cgroupfs elsewhere, and says so; a file or a flag that sets it
// wins on either host.
func TestCgroupDriverFollowsInit(t *testing.T) {
	defer func(f func() bool) { systemdBooted = f }(systemdBooted)
	unset := write(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	set := write(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: cgroupfs\n")
	for _, tc := range []struct {
		booted       bool
		path         string
		args         []string
		want, origin string
	}{
		{true, unset, nil, "systemd", "default (systemd is init)"},
		{false, unset, nil, "cgroupfs", "default (systemd is not init)"},
		{true, "", nil, "systemd", "default (systemd is init)"},
		{true, set, nil, "cgroupfs", "file " + set},
		{false, unset, []string{"--cgroup-driver=systemd"}, "systemd", "flag --cgroup-driver"},
	} {
		systemdBooted = func() bool { return tc.booted }
		var c *Config
		var err error
		if tc.args != nil {
			c, _, _, err = kubeletLoad(t, append([]string{"--config", tc.path}, tc.args...)...)
		} else {
			c, _, err = Load(tc.path, Flags{})
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.CgroupDriver != tc.want || c.Origin("cgroupDriver") != tc.origin {
			t.Errorf("booted=%v file %q %v: cgroupDriver %q from %q, want %q from %q",
				tc.booted, tc.path, tc.args, c.CgroupDriver, c.Origin("cgroupDriver"), tc.want, tc.origin)
		}
	}
}

func TestLoadDefaultsWithoutFile(t *testing.T) {
	c, warnings, err := Load("", Flags{HostnameOverride: "x"})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("Load: %v, warnings %q", err, warnings)
	}
	if c.StaticPodPath != DefaultStaticPodPath || c.Port != 10250 || c.Address != "0.0.0.0" {
		t.Errorf("staticPodPath %q port %d address %q", c.StaticPodPath, c.Port, c.Address)
	}
	if c.EvictionHard["nodefs.available"] != "10%" || len(c.EvictionHard) != 5 {
		t.Errorf("evictionHard = %v, want the kubelet's five defaults", c.EvictionHard)
	}
	host, _ := os.Hostname()
	c, _, err = Load("", Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName != strings.ToLower(host) || c.Origin("nodeName") != "default (hostname)" {
		t.Errorf("nodeName %q from %q, want %q", c.NodeName, c.Origin("nodeName"), strings.ToLower(host))
	}
}

// The read-only port shows every pod's env values without authentication: with
// no address given it listens on loopback, and config says why. An address in
// the file is kept as written, and with the port off the kubelet's default
// stays.
func TestReadOnlyPortDefaultsToLoopback(t *testing.T) {
	const head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	seed, err := os.ReadFile("testdata/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body, address, origin, readOnly string
	}{
		// The node API, authenticated, on all interfaces as the kubelet's;
		// the read-only port on loopback.
		{"port on, no address", head + "readOnlyPort: 10255\n", "0.0.0.0", "default (the read-only port on loopback)", "127.0.0.1"},
		{"port on, all interfaces asked for", head + "readOnlyPort: 10255\naddress: 0.0.0.0\n", "0.0.0.0", "file", "0.0.0.0"},
		{"seed with the port on", string(seed) + "readOnlyPort: 10255\n", "192.168.0.8", "file", "192.168.0.8"},
		{"port off", head, "0.0.0.0", OriginDefault, "0.0.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, tc.body)
			c, _, err := Load(p, Flags{HostnameOverride: "n"})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.origin
			if want == "file" {
				want = "file " + p
			}
			if c.Address != tc.address || c.Origin("address") != want {
				t.Errorf("address %q from %q, want %q from %q", c.Address, c.Origin("address"), tc.address, want)
			}
			if got := c.ReadOnlyAddress(); got != tc.readOnly {
				t.Errorf("read-only port on %q, want %q", got, tc.readOnly)
			}
		})
	}
}

func TestLoadWarnsOncePerIgnoredField(t *testing.T) {
	p := write(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxOpenFiles: 1000000   # the default: no warning
failSwapOn: false       # honoured: no warning
authentication:
  x509:
    clientCAFile: /etc/ca.crt
  webhook:
    enabled: false      # honoured: no warning
  anonymous:
    enabled: false      # the default: no warning
authorization:
  webhook:
    cacheAuthorizedTTL: 5m   # honoured: no warning
clusterDNS: [10.0.0.10]
containerLogMaxWorkers: 4
mergeDefaultEvictionSettings: true
evictionHard:
  memory.available: 1Gi
`)
	c, warnings, err := Load(p, Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"clusterDNS", "containerLogMaxWorkers"}
	if len(warnings) != len(want) {
		t.Fatalf("warnings = %q, want one each for %v", warnings, want)
	}
	for i, w := range want {
		if !strings.Contains(warnings[i], w+" is set but staticpodd ignores it") || !strings.Contains(warnings[i], p) {
			t.Errorf("warning %d = %q, want it to name %s and the file", i, warnings[i], w)
		}
	}
	if c.FailSwapOn {
		t.Error("failSwapOn = true, want the file's false")
	}
	if c.ClientCAFile != "/etc/ca.crt" {
		t.Errorf("clientCAFile = %q", c.ClientCAFile)
	}
	if c.EvictionHard["memory.available"] != "1Gi" || c.EvictionHard["nodefs.available"] != "10%" {
		t.Errorf("evictionHard = %v, want defaults merged under the file's", c.EvictionHard)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown field", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPth: /x\n", `unknown field "staticPodPth"`},
		{"nested unknown field", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  x509:\n    caFile: /x\n", `unknown field "authentication.x509.caFile"`},
		{"wrong apiVersion", "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", "want apiVersion kubelet.config.k8s.io/v1beta1"},
		{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", "kind KubeProxyConfiguration"},
		{"bad port", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nport: 70000\n", "port: 70000 is not between 1 and 65535"},
		{"bad TLS version", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntlsMinVersion: TLS1.3\n", `tlsMinVersion: "TLS1.3" is not one of VersionTLS10`},
		{"bad cipher", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntlsCipherSuites: [TLS_AES_128_GCM_SHA256, RC4]\n", `tlsCipherSuites: "RC4" is not a cipher suite Go knows`},
		{"bad authorization mode", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthorization: {mode: RBAC}\n", `authorization.mode: "RBAC" is neither AlwaysAllow nor Webhook`},
		{"bad driver", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: foo\n", "cgroupDriver"},
		{"bad size", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxSize: lots\n", "containerLogMaxSize"},
		{"zero size", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxSize: \"0\"\n", "containerLogMaxSize: 0 would rotate at every line"},
		{"one file", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxFiles: 1\n", "containerLogMaxFiles: 1 is less than 2"},
		{"not yaml", "apiVersion: [\n", "config"},
		{"bad threshold", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: lots\n", `evictionHard: memory.available: "lots"`},
		{"unknown signal", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.free: 1Gi\n", "evictionHard: memory.free: unsupported eviction signal"},
		{"soft without grace", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionSoft:\n  nodefs.available: 20%\n", "evictionSoftGracePeriod: nodefs.available: grace period must be specified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, tc.body)
			_, _, err := Load(p, Flags{HostnameOverride: "n"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("err = %v, want it to contain %q and the file name", err, tc.want)
			}
		})
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var f Flags
	f.Register(fs)
	// --root-dir and --run-dir come from the root command's persistent flags.
	fs.String(FlagRootDir, DefaultRootDir, "")
	fs.String(FlagRunDir, DefaultRunDir, "")
	err := fs.Parse([]string{
		"--config", "testdata/seed.yaml",
		"--pod-manifest-path", "/srv/manifests",
		"--manifest-url", "http://127.0.0.1:1/pods",
		"--manifest-url-header", "A:1,B:2", "--manifest-url-header", "A:3",
		"--hostname-override", "Edge-1",
		"--root-dir", "/srv/root",
	})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := Load(f.ConfigFile, f)
	if err != nil {
		t.Fatal(err)
	}
	if c.StaticPodPath != "/srv/manifests" || c.Origin("staticPodPath") != "flag --pod-manifest-path" {
		t.Errorf("staticPodPath %q from %q", c.StaticPodPath, c.Origin("staticPodPath"))
	}
	if c.RootDir != "/srv/root" || c.Origin("rootDir") != "flag --root-dir" {
		t.Errorf("rootDir %q from %q", c.RootDir, c.Origin("rootDir"))
	}
	if c.RunDir != DefaultRunDir || c.Origin("runDir") != OriginDefault {
		t.Errorf("runDir %q from %q", c.RunDir, c.Origin("runDir"))
	}
	if got := c.StaticPodURLHeader["A"]; len(got) != 2 || got[0] != "1" || got[1] != "3" || c.StaticPodURLHeader["B"][0] != "2" {
		t.Errorf("headers = %v", c.StaticPodURLHeader)
	}
	if c.Address != "192.168.0.8" || c.NodeName != "edge-1" {
		t.Errorf("address %q nodeName %q", c.Address, c.NodeName)
	}
	if c.Origin("configFile") != "flag --config" {
		t.Errorf("configFile origin %q", c.Origin("configFile"))
	}
}

func TestBadHeaderFlag(t *testing.T) {
	_, _, err := Load("", Flags{HostnameOverride: "n", ManifestURLHeaders: []string{"novalue"}})
	if err == nil || !strings.Contains(err.Error(), "--manifest-url-header") {
		t.Errorf("err = %v", err)
	}
}

// Relative paths in the file are relative to the file, as in the kubelet; a
// relative flag is relative to the working directory.
func TestRelativePathsResolveAgainstTheFile(t *testing.T) {
	p := write(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: manifests\npodLogsDir: ../logs\ntlsCertFile: pki/cert.pem\n")
	dir := filepath.Dir(p)
	c, _, err := Load(p, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "manifests"); c.StaticPodPath != want {
		t.Errorf("staticPodPath = %q, want %q", c.StaticPodPath, want)
	}
	if want := filepath.Join(filepath.Dir(dir), "logs"); c.PodLogsDir != want {
		t.Errorf("podLogsDir = %q, want %q", c.PodLogsDir, want)
	}
	if want := filepath.Join(dir, "pki/cert.pem"); c.TLSCertFile != want {
		t.Errorf("tlsCertFile = %q, want %q", c.TLSCertFile, want)
	}
}

func TestPodPidsLimit(t *testing.T) {
	c, _, err := Load("", Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if c.PodPidsLimit != -1 || c.Origin("podPidsLimit") != OriginDefault {
		t.Errorf("podPidsLimit %d from %q, want the kubelet's default -1", c.PodPidsLimit, c.Origin("podPidsLimit"))
	}
	p := write(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
podPidsLimit: 1024
`)
	c, warnings, err := Load(p, Flags{HostnameOverride: "n"})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("Load: %v, warnings %q", err, warnings)
	}
	if c.PodPidsLimit != 1024 || c.Origin("podPidsLimit") != "file "+p {
		t.Errorf("podPidsLimit %d from %q, want 1024 from the file", c.PodPidsLimit, c.Origin("podPidsLimit"))
	}
}

// STATICPODD_ROOT_DIR and STATICPODD_RUN_DIR give the dirs a flag does not.
func TestDirsFromEnvironment(t *testing.T) {
	t.Setenv(EnvRootDir, "/srv/env-root")
	t.Setenv(EnvRunDir, "/run/env-run")
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var f Flags
	f.Register(fs)
	fs.String(FlagRootDir, DefaultRootDir, "")
	fs.String(FlagRunDir, DefaultRunDir, "")
	if err := fs.Parse([]string{"--hostname-override", "n", "--run-dir", "/run/flag"}); err != nil {
		t.Fatal(err)
	}
	c, _, err := Load("", f)
	if err != nil {
		t.Fatal(err)
	}
	if c.RootDir != "/srv/env-root" || c.Origin("rootDir") != "env STATICPODD_ROOT_DIR" {
		t.Errorf("rootDir %q from %q, want the environment's", c.RootDir, c.Origin("rootDir"))
	}
	if c.RunDir != "/run/flag" || c.Origin("runDir") != "flag --run-dir" {
		t.Errorf("runDir %q from %q, want the flag's over the environment's", c.RunDir, c.Origin("runDir"))
	}
}

// credentialsDirectory is systemd's $CREDENTIALS_DIRECTORY unless the flag
// gives another; a relative one is refused.
func TestCredentialsDirectory(t *testing.T) {
	t.Setenv(EnvCredentialsDirectory, "/run/credentials/staticpodd.service")
	c, _, err := Load("", Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if c.CredentialsDirectory != "/run/credentials/staticpodd.service" || c.Origin("credentialsDirectory") != "env CREDENTIALS_DIRECTORY" {
		t.Errorf("credentialsDirectory %q from %q, want systemd's", c.CredentialsDirectory, c.Origin("credentialsDirectory"))
	}
	c, _, err = Load("", Flags{HostnameOverride: "n", CredentialsDir: "/etc/test-creds"})
	if err != nil || c.CredentialsDirectory != "/etc/test-creds" || c.Origin("credentialsDirectory") != "flag --credentials-directory" {
		t.Errorf("credentialsDirectory %q from %q (%v), want the flag's", c.CredentialsDirectory, c.Origin("credentialsDirectory"), err)
	}
	if _, _, err := Load("", Flags{HostnameOverride: "n", CredentialsDir: "creds"}); err == nil || !strings.Contains(err.Error(), `credentialsDirectory: "creds" is not an absolute path`) {
		t.Errorf("a relative directory: %v", err)
	}
}

// imagePolicyFile: --image-policy (made absolute), else
// $STATICPODD_IMAGE_POLICY (absolute only), else none; the kubelet's file
// cannot carry it, and says where it goes.
func TestImagePolicyFile(t *testing.T) {
	c, _, err := Load("", Flags{HostnameOverride: "n"})
	if err != nil || c.ImagePolicyFile != "" || c.Origin("imagePolicyFile") != OriginDefault {
		t.Fatalf("default: %q from %q (%v), want none", c.ImagePolicyFile, c.Origin("imagePolicyFile"), err)
	}
	t.Setenv(EnvImagePolicy, "/etc/containers/policy.json")
	c, _, err = Load("", Flags{HostnameOverride: "n"})
	if err != nil || c.ImagePolicyFile != "/etc/containers/policy.json" || c.Origin("imagePolicyFile") != "env "+EnvImagePolicy {
		t.Errorf("env: %q from %q (%v)", c.ImagePolicyFile, c.Origin("imagePolicyFile"), err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	c, _, err = Load("", Flags{HostnameOverride: "n", ImagePolicy: "policy.json"})
	if err != nil || c.ImagePolicyFile != filepath.Join(wd, "policy.json") || c.Origin("imagePolicyFile") != "flag --image-policy" {
		t.Errorf("flag: %q from %q (%v), want it absolute, over the environment", c.ImagePolicyFile, c.Origin("imagePolicyFile"), err)
	}
	t.Setenv(EnvImagePolicy, "policy.json")
	if _, _, err := Load("", Flags{HostnameOverride: "n"}); err == nil || !strings.Contains(err.Error(), `imagePolicyFile: "policy.json" is not an absolute path`) {
		t.Errorf("a relative $%s: %v", EnvImagePolicy, err)
	}
	p := write(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimagePolicyFile: /etc/containers/policy.json\n")
	if _, _, err := Load(p, Flags{HostnameOverride: "n"}); err == nil || !strings.Contains(err.Error(), "imagePolicyFile is not a KubeletConfiguration field: give it with --image-policy or $STATICPODD_IMAGE_POLICY") {
		t.Errorf("in the file: %v", err)
	}
}

// A negative containerLogMaxSize turns rotation off, as in the kubelet.
func TestNegativeLogSizeTurnsRotationOff(t *testing.T) {
	p := write(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerLogMaxSize: \"-1\"\n")
	c, _, err := Load(p, Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ContainerLogMaxSize != -1 {
		t.Errorf("containerLogMaxSize = %d, want -1", c.ContainerLogMaxSize)
	}
}

// The URL settings with their origins; header values and a password in the
// URL never show.
func TestManifestURLSettings(t *testing.T) {
	p := write(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodURL: https://me:sesame@config.example/pods
staticPodURLHeader:
  Authorization: ["Bearer sesame"]
  X-Node: [a, b]
httpCheckFrequency: 5s
`)
	c, _, err := Load(p, Flags{HostnameOverride: "n", ManifestURLCA: "/etc/pki/appliance-ca.pem"})
	if err != nil {
		t.Fatal(err)
	}
	if c.StaticPodURL != "https://me:sesame@config.example/pods" || c.HTTPCheckFrequency != 5*time.Second ||
		c.StaticPodURLCA != "/etc/pki/appliance-ca.pem" || c.StaticPodURLHeader.Get("Authorization") != "Bearer sesame" {
		t.Errorf("config = %q %v %q %v", c.StaticPodURL, c.HTTPCheckFrequency, c.StaticPodURLCA, c.StaticPodURLHeader)
	}
	want := map[string][2]string{
		"staticPodURL":       {"https://me:xxxxx@config.example/pods", "file " + p},
		"staticPodURLHeader": {"Authorization=(redacted),X-Node=(redacted)", "file " + p},
		"httpCheckFrequency": {"5s", "file " + p},
		"manifestURLCA":      {"/etc/pki/appliance-ca.pem", "flag --manifest-url-ca"},
	}
	for _, e := range c.Entries() {
		if strings.Contains(e.Value, "sesame") {
			t.Errorf("%s shows a secret: %q", e.Key, e.Value)
		}
		if w, ok := want[e.Key]; ok {
			if e.Value != w[0] || e.Origin != w[1] {
				t.Errorf("%s = %q from %q, want %q from %q", e.Key, e.Value, e.Origin, w[0], w[1])
			}
			delete(want, e.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("not shown: %v", want)
	}

	// The kubelet's file defaulting: 0 is the default, 20s.
	p = write(t, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nhttpCheckFrequency: 0s\n")
	if c, _, err = Load(p, Flags{HostnameOverride: "n"}); err != nil || c.HTTPCheckFrequency != 20*time.Second {
		t.Errorf("httpCheckFrequency 0s = %v (%v), want the kubelet's 20s", c.HTTPCheckFrequency, err)
	}
}

func TestBadManifestURL(t *testing.T) {
	for _, tc := range []struct {
		flags Flags
		want  string
	}{
		{Flags{ManifestURL: "ftp://example/pods"}, `staticPodURL: "ftp://example/pods": want an http:// or https:// URL`},
		{Flags{ManifestURL: "/etc/pods.yaml"}, "want an http:// or https:// URL"},
		{Flags{ManifestURL: "http:///pods"}, `staticPodURL: "http:///pods" has no host`},
		{Flags{ManifestURL: "http://me:sesame@a b/"}, "staticPodURL: invalid character"},
		{Flags{ManifestURLCA: "/ca.pem"}, "manifestURLCA: --manifest-url-ca is given but there is no staticPodURL"},
	} {
		tc.flags.HostnameOverride = "n"
		_, _, err := Load("", tc.flags)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sesame") {
			t.Errorf("%+v: err = %v, want %q", tc.flags, err, tc.want)
		}
	}
}
