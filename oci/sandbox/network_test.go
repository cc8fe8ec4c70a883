package sandbox

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestPortConflict(t *testing.T) {
	tcp := func(port int32, ip string) portMapping {
		return portMapping{HostPort: port, ContainerPort: 80, Protocol: "tcp", HostIP: ip}
	}
	for _, tc := range []struct {
		name        string
		want, taken []portMapping
		conflict    bool
	}{
		{"same port, every address", []portMapping{tcp(80, "")}, []portMapping{tcp(80, "")}, true},
		{"other port", []portMapping{tcp(80, "")}, []portMapping{tcp(81, "")}, false},
		{"other protocol", []portMapping{tcp(80, "")}, []portMapping{{HostPort: 80, Protocol: "udp"}}, false},
		{"one address against every address", []portMapping{tcp(80, "10.0.0.1")}, []portMapping{tcp(80, "")}, true},
		{"every address against one address", []portMapping{tcp(80, "")}, []portMapping{tcp(80, "10.0.0.1")}, true},
		{"two addresses", []portMapping{tcp(80, "10.0.0.1")}, []portMapping{tcp(80, "10.0.0.2")}, false},
		{"same address", []portMapping{tcp(80, "10.0.0.1")}, []portMapping{tcp(80, "10.0.0.1")}, true},
		{"nothing taken", []portMapping{tcp(80, "")}, nil, false},
		// portmap publishes on every address for an unspecified hostIP, and
		// reads an address however it is written.
		{"0.0.0.0 against one address", []portMapping{tcp(80, "10.0.0.1")}, []portMapping{tcp(80, "0.0.0.0")}, true},
		{"one address against 0.0.0.0", []portMapping{tcp(80, "0.0.0.0")}, []portMapping{tcp(80, "10.0.0.1")}, true},
		{":: against one address", []portMapping{tcp(80, "fd00::1")}, []portMapping{tcp(80, "::")}, true},
		{"one address, two spellings", []portMapping{tcp(80, "fd00::1")}, []portMapping{tcp(80, "fd00:0::1")}, true},
		{"IPv4-mapped 0.0.0.0", []portMapping{tcp(80, "10.0.0.1")}, []portMapping{tcp(80, "::ffff:0.0.0.0")}, true},
		{"IPv4-mapped spelling", []portMapping{tcp(80, "::ffff:10.0.0.1")}, []portMapping{tcp(80, "10.0.0.1")}, true},
	} {
		if _, got := portConflict(tc.want, tc.taken); got != tc.conflict {
			t.Errorf("%s: conflict %v, want %v", tc.name, got, tc.conflict)
		}
	}
}

func TestPortMappingsSkipsUnpublished(t *testing.T) {
	got := portMappings([]podspec.PortMapping{
		{HostPort: 0, ContainerPort: 81, Protocol: "tcp"},
		{HostPort: 8080, ContainerPort: 81, Protocol: "TCP", HostIP: "10.0.0.1"},
	})
	if len(got) != 1 || got[0] != (portMapping{HostPort: 8080, ContainerPort: 81, Protocol: "tcp", HostIP: "10.0.0.1"}) {
		t.Errorf("portMappings = %+v", got)
	}
}

func TestCNIContainerID(t *testing.T) {
	if got := cniContainerID("0123abcd-ef"); got != "0123abcd-ef" {
		t.Errorf("a UID CNI accepts is changed: %q", got)
	}
	for _, uid := range []string{"a b", "-x", "x;y", strings.Repeat("a", 200), "ü"} {
		got := cniContainerID(uid)
		if !cniIDPattern.MatchString(got) || got == uid {
			t.Errorf("cniContainerID(%q) = %q, not a hash CNI accepts", uid, got)
		}
		if cniContainerID(uid) != got {
			t.Errorf("cniContainerID(%q) is not stable", uid)
		}
	}
}

func TestDefaultNetworkConf(t *testing.T) {
	data, err := defaultNetworkConf("staticpodd0", testSubnet, "/run/staticpodd/cni/networks", true)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPMasq bool   `json:"ipMasq"`
			IPAM   struct {
				Type    string                `json:"type"`
				Ranges  [][]map[string]string `json:"ranges"`
				DataDir string                `json:"dataDir"`
			} `json:"ipam"`
			Capabilities map[string]bool `json:"capabilities"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if conf.Name != DefaultNetworkName || len(conf.Plugins) != 2 {
		t.Fatalf("default network %s", data)
	}
	br, pm := conf.Plugins[0], conf.Plugins[1]
	// Masquerade is one rule of staticpodd's own for the range, not the
	// bridge plugin's per pod.
	if br.Type != "bridge" || br.Bridge != "staticpodd0" || br.IPMasq || br.IPAM.Type != "host-local" ||
		br.IPAM.Ranges[0][0]["subnet"] != "10.86.0.0/16" || br.IPAM.DataDir != "/run/staticpodd/cni/networks" {
		t.Errorf("bridge plugin: %+v", br)
	}
	if pm.Type != "portmap" || !pm.Capabilities["portMappings"] {
		t.Errorf("portmap plugin: %+v", pm)
	}
	// Without hostPorts, no portmap: its DEL rewrites the nat table.
	if data, err := defaultNetworkConf("staticpodd0", testSubnet, "/x", false); err != nil || strings.Contains(string(data), "portmap") {
		t.Errorf("default network without hostPorts: %v\n%s", err, data)
	}
	for _, bad := range []struct {
		bridge string
		subnet netip.Prefix
		why    string
	}{
		{"", testSubnet, "bridge"},
		{"a-name-far-too-long", testSubnet, "bridge"},
		{"br/0", testSubnet, "bridge"},
		{"br0", netip.MustParsePrefix("10.0.0.0/31"), "range"},
		{"br0", netip.Prefix{}, "range"},
	} {
		if _, err := defaultNetworkConf(bad.bridge, bad.subnet, "/x", false); err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("defaultNetworkConf(%q, %s): %v, want an error about the %s", bad.bridge, bad.subnet, err, bad.why)
		}
	}
}

func TestPodHosts(t *testing.T) {
	const head = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	if got := string(podHosts("web", []string{"10.86.0.5", "fd00::5"})); got != head+"10.86.0.5\tweb\nfd00::5\tweb\n" {
		t.Errorf("hosts with IPs:\n%s", got)
	}
	if got := string(podHosts("web", nil)); got != head+"127.0.1.1\tweb\n" {
		t.Errorf("hosts without IPs:\n%s", got)
	}
}

// testSubnet is a range of the default network's size.
var testSubnet = netip.MustParsePrefix("10.86.0.0/16")

// TestSameNetwork: a pod made now would be on a running pod's network only
// with the same network from the same file and plugins; the built-in
// network's plugins vary with hostPorts; no network is the same as none.
func TestSameNetwork(t *testing.T) {
	podman := podspec.NetworkConf{Network: "podman", Source: "/etc/cni/net.d/87-podman.conflist", Plugins: []string{"bridge", "portmap"}}
	on := func(c podspec.NetworkConf) podspec.SandboxStatus {
		return podspec.SandboxStatus{Network: c.Network, Source: c.Source, Plugins: c.Plugins, Message: c.Why}
	}
	builtin := podspec.NetworkConf{Network: DefaultNetworkName, Source: "default", Plugins: []string{"bridge"}}
	withPorts := builtin
	withPorts.Plugins = []string{"bridge", "portmap"}
	otherPlugins := podman
	otherPlugins.Plugins = []string{"bridge"}
	otherFile := podman
	otherFile.Source = "/etc/cni/net.d/00-first.conflist"
	none := podspec.NetworkConf{Why: "no CNI configuration"}
	oldRecord := podspec.SandboxStatus{Network: "podman"}
	for _, tc := range []struct {
		name string
		st   podspec.SandboxStatus
		now  podspec.NetworkConf
		want bool
	}{
		{"same", on(podman), podman, true},
		{"built-in, hostPorts or not", on(withPorts), builtin, true},
		{"a file sorts first", on(podman), otherFile, false},
		{"other plugins", on(podman), otherPlugins, false},
		{"the built-in network gave way", on(builtin), podman, false},
		{"a configuration that no longer loads", on(podman), none, false},
		{"none either way", on(none), podspec.NetworkConf{Why: "another reason"}, true},
		{"a network now where there was none", on(none), builtin, false},
		{"an earlier version's record, by name", oldRecord, otherFile, true},
	} {
		if got := sameNetwork(tc.st, tc.now); got != tc.want {
			t.Errorf("%s: sameNetwork = %v, want %v", tc.name, got, tc.want)
		}
	}
}
