package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

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
			got, _, err := PodDNS(pod, tc.resolvConf)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Servers, tc.servers) || !slices.Equal(got.Searches, tc.searches) || !slices.Equal(got.Options, tc.options) {
				t.Errorf("got %+v, want servers %v searches %v options %v", got, tc.servers, tc.searches, tc.options)
			}
		})
	}
	if _, _, err := PodDNS(&v1.Pod{}, filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "resolver configuration") {
		t.Errorf("missing resolver file: %v", err)
	}
	long := []string{}
	for i := range 40 {
		long = append(long, fmt.Sprintf("d%02d.example", i))
	}
	got, warnings, err := PodDNS(&v1.Pod{Spec: v1.PodSpec{DNSPolicy: v1.DNSNone, DNSConfig: &v1.PodDNSConfig{Nameservers: []string{"192.0.2.1"}, Searches: long}}}, resolv)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Searches) != 32 || len(warnings) != 1 || !strings.Contains(warnings[0], "Search Line limits were exceeded") {
		t.Errorf("40 search domains: kept %d, warnings %q", len(got.Searches), warnings)
	}
}
