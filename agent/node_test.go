package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

func mustParsePod(t *testing.T, doc string) *v1.Pod {
	t.Helper()
	pods, _, err := manifest.ParseFile([]byte(doc), "/m/p.yaml", "node1")
	if err != nil {
		t.Fatal(err)
	}
	return pods[0].Pod
}

// A Localhost seccomp profile is read from <root-dir>/seccomp, never from
// outside it, for the conversion that names it.
func TestSeccompResolution(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, manifest.SeccompDir)
	outside := t.TempDir()
	profile := `{"defaultAction":"SCMP_ACT_ALLOW"}`
	for name, data := range map[string]string{
		filepath.Join(dir, "audit.json"):         profile,
		filepath.Join(dir, "sub", "strict.json"): profile,
		filepath.Join(outside, "secret.json"):    "not for containers",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"inside.json":   "sub/strict.json",
		"absolute.json": filepath.Join(outside, "secret.json"),
		"climb.json":    "../../" + filepath.Base(outside) + "/secret.json",
		"etc.json":      "/etc/passwd",
		"dev.json":      "/dev/zero",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := manifest.Paths{RootDir: root}
	pod := func(podLevel, containerLevel string) string {
		s := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n"
		if podLevel != "" {
			s += "  securityContext: {seccompProfile: " + podLevel + "}\n"
		}
		if containerLevel != "" {
			return s + "  containers: [{name: c, image: i, securityContext: {seccompProfile: " + containerLevel + "}}]\n"
		}
		return s + "  containers: [{name: c, image: i}]\n"
	}
	for _, tc := range []struct {
		name, doc      string
		seccompDefault bool
		want           podspec.SeccompType
		wantName       string
		wantErr        string
	}{
		{"none", pod("", ""), false, podspec.SeccompUnconfined, "", ""},
		{"seccompDefault", pod("", ""), true, podspec.SeccompRuntimeDefault, "", ""},
		{"explicit unconfined over seccompDefault", pod("{type: Unconfined}", ""), true, podspec.SeccompUnconfined, "", ""},
		{"pod's", pod("{type: RuntimeDefault}", ""), false, podspec.SeccompRuntimeDefault, "", ""},
		{"container's over pod's", pod("{type: RuntimeDefault}", "{type: Unconfined}"), false, podspec.SeccompUnconfined, "", ""},
		{"localhost", pod("", "{type: Localhost, localhostProfile: audit.json}"), false, podspec.SeccompLocalhost, "audit.json", ""},
		{"localhost in a subdirectory", pod("{type: Localhost, localhostProfile: sub/strict.json}", ""), false, podspec.SeccompLocalhost, "sub/strict.json", ""},
		{"symlink inside", pod("", "{type: Localhost, localhostProfile: inside.json}"), false, podspec.SeccompLocalhost, "inside.json", ""},
		{"missing", pod("", "{type: Localhost, localhostProfile: nope.json}"), false, "", "", "no such file"},
		{"absolute symlink out", pod("", "{type: Localhost, localhostProfile: absolute.json}"), false, "", "", "leads out of the directory"},
		{"relative symlink out", pod("", "{type: Localhost, localhostProfile: climb.json}"), false, "", "", "leads out of the directory"},
		{"symlink to /etc", pod("", "{type: Localhost, localhostProfile: etc.json}"), false, "", "", "leads out of the directory"},
		{"symlink to a device", pod("", "{type: Localhost, localhostProfile: dev.json}"), false, "", "", "leads out of the directory"},
		{"directory", pod("", "{type: Localhost, localhostProfile: dir.json}"), false, "", "", "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v1pod := mustParsePod(t, tc.doc)
			p := p
			p.SeccompDefault = tc.seccompDefault
			c, err := manifestConverter{paths: p}.Container(v1pod, &v1pod.Spec.Containers[0], 0)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "seccompProfile") {
					t.Fatalf("err = %v, want it to name seccompProfile and say %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.Security.Seccomp
			if got.Type != tc.want || got.Name != tc.wantName {
				t.Errorf("seccomp %q %q, want %q %q", got.Type, got.Name, tc.want, tc.wantName)
			}
			if tc.want == podspec.SeccompLocalhost && string(got.Profile) != profile {
				t.Errorf("profile %q, want %q", got.Profile, profile)
			}
		})
	}
}

func TestPodDNS(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	host := "# generated\nnameserver 192.0.2.1\nsearch old.example\nnameserver 192.0.2.2\nsearch example.com. corp.example .\noptions ndots:2 edns0\noptions ndots:3\n"
	if err := os.WriteFile(resolv, []byte(host), 0o644); err != nil {
		t.Fatal(err)
	}
	two := "2"
	for _, tc := range []struct {
		name                       string
		policy                     v1.DNSPolicy
		config                     *v1.PodDNSConfig
		resolvConf                 string
		servers, searches, options []string
	}{
		{"ClusterFirst falls back to the host's", v1.DNSClusterFirst, nil, resolv,
			[]string{"192.0.2.1", "192.0.2.2"}, []string{"example.com", "corp.example"}, []string{"ndots:3", "edns0"}},
		{"Default", v1.DNSDefault, nil, resolv,
			[]string{"192.0.2.1", "192.0.2.2"}, []string{"example.com", "corp.example"}, []string{"ndots:3", "edns0"}},
		{"None takes dnsConfig only", v1.DNSNone, &v1.PodDNSConfig{Nameservers: []string{"198.51.100.1"}, Searches: []string{"a.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}}}, resolv,
			[]string{"198.51.100.1"}, []string{"a.example"}, []string{"ndots:2"}},
		{"dnsConfig added to the host's, duplicates dropped, options replaced", v1.DNSDefault,
			&v1.PodDNSConfig{Nameservers: []string{"192.0.2.2", "198.51.100.1"}, Searches: []string{"corp.example", "b.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "rotate"}}}, resolv,
			[]string{"192.0.2.1", "192.0.2.2", "198.51.100.1"}, []string{"example.com", "corp.example", "b.example"}, []string{"ndots:2", "edns0", "rotate"}},
		{"no resolver file: a local resolver", v1.DNSClusterFirst, nil, "",
			[]string{"127.0.0.1"}, []string{"."}, nil},
		{"nameservers cut to 3", v1.DNSDefault, &v1.PodDNSConfig{Nameservers: []string{"198.51.100.1", "198.51.100.2"}}, resolv,
			[]string{"192.0.2.1", "192.0.2.2", "198.51.100.1"}, []string{"example.com", "corp.example"}, []string{"ndots:3", "edns0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{DNSPolicy: tc.policy, DNSConfig: tc.config}}
			got, _, err := podDNS(pod, tc.resolvConf)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Servers, tc.servers) || !slices.Equal(got.Searches, tc.searches) || !slices.Equal(got.Options, tc.options) {
				t.Errorf("got %+v, want servers %v searches %v options %v", got, tc.servers, tc.searches, tc.options)
			}
		})
	}
	if _, _, err := podDNS(&v1.Pod{}, filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "resolver configuration") {
		t.Errorf("missing resolver file: %v", err)
	}
	long := []string{}
	for i := range 40 {
		long = append(long, fmt.Sprintf("d%02d.example", i))
	}
	got, warnings, err := podDNS(&v1.Pod{Spec: v1.PodSpec{DNSPolicy: v1.DNSNone, DNSConfig: &v1.PodDNSConfig{Nameservers: []string{"192.0.2.1"}, Searches: long}}}, resolv)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Searches) != 32 || len(warnings) != 1 || !strings.Contains(warnings[0], "Search Line limits were exceeded") {
		t.Errorf("40 search domains: kept %d, warnings %q", len(got.Searches), warnings)
	}
}
