package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// The pod network's defaults (conf dir, plugin dirs, bridge, range) are the
// configuration's (agent/config); NetworkConfig always has them filled in.
const (
	// DefaultNetworkName names the built-in default network (CNI's "name":
	// its cache files and IPAM leases are kept under it).
	DefaultNetworkName = "staticpodd"
	// podIfName is the pod's interface, as containerd and CRI-O name it.
	podIfName = "eth0"
)

// NetworkConfig is how pods without hostNetwork get their network.
type NetworkConfig struct {
	// ConfDir holds CNI configuration: the first .conflist, .conf or .json
	// file by name is the pod network, as the kubelet and containerd choose
	// it. With none, the built-in default network is used.
	ConfDir string
	// BinDirs are searched for plugins, in order.
	BinDirs []string
	// CacheDir is libcni's cache of each attachment's configuration and
	// result, from which DEL is run.
	CacheDir string
	// Bridge and Subnet are the built-in default network's bridge and range.
	Bridge string
	Subnet netip.Prefix
	// IPAMDir holds the default network's host-local leases.
	IPAMDir string
	// OwnPorts are the daemon's own TCP listeners (the node API's port,
	// the read-only port), which no pod may publish a hostPort over:
	// portmap's DNAT would take their connections from the host's other
	// addresses.
	OwnPorts []OwnPort
}

// OwnPort is a TCP port the daemon listens on, on Address ("" or an
// unspecified address: every address), named as its configuration names it.
type OwnPort struct {
	Name    string
	Address string
	Port    int32
}

// portMapping is one entry of CNI's portMappings capability, as containerd
// passes it (pkg/cri/server/sandbox_run.go toCNIPortMappings).
type portMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

func portMappings(ps []podspec.PortMapping) []portMapping {
	var out []portMapping
	for _, p := range ps {
		if p.HostPort <= 0 {
			continue // containerd skips them too
		}
		out = append(out, portMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort,
			Protocol: strings.ToLower(p.Protocol), HostIP: p.HostIP})
	}
	return out
}

// portConflict returns a description of the first of want that one of
// taken (published by pod owner) already holds: the same port and protocol
// on the same address, or either on every address.
func portConflict(want, taken []portMapping) (portMapping, bool) {
	for _, w := range want {
		for _, t := range taken {
			if w.HostPort != t.HostPort || w.Protocol != t.Protocol {
				continue
			}
			wa, wEvery := hostAddr(w.HostIP)
			ta, tEvery := hostAddr(t.HostIP)
			if wEvery || tEvery || wa == ta {
				return t, true
			}
		}
	}
	return portMapping{}, false
}

// hostAddr is the address a hostIP publishes on, or every address: for
// none, and for 0.0.0.0 and ::, which portmap takes as none. An address
// that does not parse (validation refuses it) is every address, so that
// it conflicts rather than slips by.
func hostAddr(ip string) (addr netip.Addr, every bool) {
	a, err := netip.ParseAddr(ip)
	if a = a.Unmap(); err != nil || a.IsUnspecified() {
		return netip.Addr{}, true
	}
	return a, false
}

// cniIDPattern is what CNI allows as a container ID.
var cniIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`)

// cniContainerID is pod uid's ID towards CNI plugins: the UID itself when CNI
// allows it, else a hash of it.
func cniContainerID(uid string) string {
	if cniIDPattern.MatchString(uid) && len(uid) <= 128 {
		return uid
	}
	sum := sha256.Sum256([]byte(uid))
	return hex.EncodeToString(sum[:])
}

// defaultNetworkConf is the built-in default network's configuration list:
// podman's default network with its own bridge and range (a bridge that is
// the pods' gateway, host-local IPAM with its leases in ipamDir, and portmap
// when the pod publishes hostPorts). lo is brought up with the namespace,
// which is all the loopback plugin would do.
//
// The bridge plugin's ipMasq is off: its per-pod chain and rule are
// replaced by one masquerade rule for the whole range (masqRule), so that a
// pod without hostPorts costs no iptables change at all. Debian's plugins
// (1.1.1) on iptables-nft failed DELs half-way in that per-pod teardown
// when several daemons' pods went at once, and what they left stayed for
// ever. For the same reason portmap, whose DEL always rewrites the nat
// table, is in the list only of a pod that has hostPorts; the list a pod
// was added with is recorded and used for its DEL.
func defaultNetworkConf(bridge string, subnet netip.Prefix, ipamDir string, portmap bool) ([]byte, error) {
	if !subnet.IsValid() || subnet.Bits() > 30 {
		return nil, fmt.Errorf("pod network range %s: want a prefix of at most /30", subnet)
	}
	if bridge == "" || len(bridge) > 15 || strings.ContainsAny(bridge, "/ \t\n:") {
		return nil, fmt.Errorf("pod network bridge %q: want an interface name of 1 to 15 characters, no '/', ':' or space", bridge)
	}
	route := "0.0.0.0/0"
	if subnet.Addr().Is6() {
		route = "::/0"
	}
	plugins := []any{
		map[string]any{
			"type":        "bridge",
			"bridge":      bridge,
			"isGateway":   true,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": subnet.Masked().String()}}},
				"routes":  []map[string]string{{"dst": route}},
				"dataDir": ipamDir,
			},
		},
	}
	if portmap {
		plugins = append(plugins, map[string]any{
			"type":         "portmap",
			"capabilities": map[string]bool{"portMappings": true},
		})
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       DefaultNetworkName,
		"plugins":    plugins,
	}
	return json.MarshalIndent(conf, "", "  ")
}

// defaultNetworkPlugins are the plugins the default network runs.
var defaultNetworkPlugins = []string{"bridge", "host-local", "portmap"}

// podHosts is the /etc/hosts of a pod with its own network: the kubelet's
// managedHostsFileContent, with a line naming the pod for each of its
// addresses; a pod without any (no pod network) names itself on 127.0.1.1,
// as Debian does for a host without a fixed address.
func podHosts(hostname string, ips []string) []byte {
	b := []byte("# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n")
	if len(ips) == 0 {
		return fmt.Appendf(b, "127.0.1.1\t%s\n", hostname)
	}
	for _, ip := range ips {
		b = fmt.Appendf(b, "%s\t%s\n", ip, hostname)
	}
	return b
}

// resolvConf is a pod's /etc/resolv.conf, written as containerd writes it
// from the kubelet's DNS configuration: search, nameserver, options.
func resolvConf(d *podspec.DNSConfig) []byte {
	var b []byte
	if len(d.Searches) > 0 {
		b = fmt.Appendf(b, "search %s\n", strings.Join(d.Searches, " "))
	}
	for _, s := range d.Servers {
		b = fmt.Appendf(b, "nameserver %s\n", s)
	}
	if len(d.Options) > 0 {
		b = fmt.Appendf(b, "options %s\n", strings.Join(d.Options, " "))
	}
	return b
}

// sameNetwork reports whether a pod made now, which would get now, would
// be on st's network: the same network from the same configuration with
// the same plugins (the built-in network's plugins vary with hostPorts), or
// no pod network either way. A record of an earlier version, which kept no
// source, is compared by the network's name.
func sameNetwork(st podspec.SandboxStatus, now podspec.NetworkConf) bool {
	switch {
	case st.Network == "" || now.Network == "":
		return st.Network == now.Network
	case st.Source == "":
		return st.Network == now.Network
	case st.Source != now.Source || st.Network != now.Network:
		return false
	}
	return st.Source == "default" || slices.Equal(st.Plugins, now.Plugins)
}
