package manifest

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Limits of a pod's resolv.conf (k8s.io/kubernetes/pkg/apis/core/validation).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	// MaxResolvConfSize bounds the resolver file: the caller reads at most
	// one byte more, and a longer one is refused.
	MaxResolvConfSize = 10 * 1 << 20
)

// ResolvConf is the node's resolver file (the kubelet's resolvConf) as the
// caller read it for PodDNS: Path "" means a local resolver, Data is at
// most MaxResolvConfSize+1 bytes of the file, and Err, when it could not be
// read, is why, naming the file.
type ResolvConf struct {
	Path string
	Data []byte
	Err  error
}

// PodDNS is the DNS configuration of pod's /etc/resolv.conf, as the kubelet's
// dns.Configurer.GetPodDNS makes it on a node without cluster DNS (staticpodd
// has none): dnsPolicy ClusterFirst and ClusterFirstWithHostNet fall back to
// Default, which is the resolver file resolvConf (the kubelet's resolvConf,
// /etc/resolv.conf; its Path "" means a local resolver: 127.0.0.1 and search
// "."), and None starts from nothing; spec.dnsConfig is added to it. The
// kubelet's limits apply: 3 nameservers, 32 search domains of at most 253
// characters and 2048 in all; what is cut is returned as warnings.
func PodDNS(pod *v1.Pod, resolvConf ResolvConf) (*podspec.DNSConfig, []string, error) {
	dns := &podspec.DNSConfig{}
	if pod.Spec.DNSPolicy != v1.DNSNone {
		switch {
		case resolvConf.Path == "":
			dns.Servers, dns.Searches = []string{"127.0.0.1"}, []string{"."}
		case resolvConf.Err != nil:
			return nil, nil, resolvConf.Err
		default:
			var err error
			if dns.Servers, dns.Searches, dns.Options, err = parseResolvConf(resolvConf.Data); err != nil {
				return nil, nil, fmt.Errorf("resolver configuration %s: %w", resolvConf.Path, err)
			}
		}
	}
	if c := pod.Spec.DNSConfig; c != nil {
		dns.Servers = omitDuplicates(append(dns.Servers, c.Nameservers...))
		dns.Searches = omitDuplicates(append(dns.Searches, c.Searches...))
		dns.Options = mergeDNSOptions(dns.Options, c.Options)
	}
	var warnings []string
	if len(dns.Servers) > maxDNSNameservers {
		dns.Servers = dns.Servers[:maxDNSNameservers]
		warnings = append(warnings, "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: "+strings.Join(dns.Servers, " "))
	}
	if s, cut := searchFitsLimits(dns.Searches); cut {
		dns.Searches = s
		warnings = append(warnings, "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: "+strings.Join(s, " "))
	}
	return dns, warnings, nil
}

// parseResolvConf is the kubelet's: nameservers accumulate, the last search
// line wins (trailing dots dropped, "." left out), options accumulate with
// the last value of each winning.
func parseResolvConf(data []byte) (servers, searches, options []string, err error) {
	if len(data) > MaxResolvConfSize {
		return nil, nil, nil, fmt.Errorf("larger than %d bytes", MaxResolvConfSize)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, MaxResolvConfSize)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) < 2 {
				return nil, nil, nil, fmt.Errorf("nameserver list is empty")
			}
			servers = append(servers, f[1])
		case "search":
			searches = []string{}
			for _, s := range f[1:] {
				if s != "." {
					searches = append(searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			options = appendOptions(options, f[1:]...)
		}
	}
	return servers, searches, options, sc.Err()
}

// appendOptions adds options, a later value of one replacing the earlier.
func appendOptions(options []string, add ...string) []string {
	for _, o := range add {
		name, _, _ := strings.Cut(o, ":")
		replaced := false
		for i, e := range options {
			if en, _, _ := strings.Cut(e, ":"); en == name {
				options[i], replaced = o, true
				break
			}
		}
		if !replaced {
			options = append(options, o)
		}
	}
	return options
}

// mergeDNSOptions puts the pod's dnsConfig options over the base ones. Unlike
// the kubelet's, which goes through a map, the order is kept (the base's
// first), so the file does not change from one sandbox to the next.
func mergeDNSOptions(base []string, add []v1.PodDNSConfigOption) []string {
	for _, o := range add {
		s := o.Name
		if o.Value != nil && *o.Value != "" {
			s += ":" + *o.Value
		}
		base = appendOptions(base, s)
	}
	return base
}

func omitDuplicates(in []string) []string {
	seen := map[string]bool{}
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// searchFitsLimits is the kubelet's formDNSSearchFitsLimits.
func searchFitsLimits(s []string) ([]string, bool) {
	cut := false
	if len(s) > maxDNSSearchPaths {
		s, cut = s[:maxDNSSearchPaths], true
	}
	kept := s[:0:0]
	for _, d := range s {
		if len(d) > validation.DNS1123SubdomainMaxLength {
			cut = true
			continue
		}
		kept = append(kept, d)
	}
	for len(kept) > 0 && len(strings.Join(kept, " ")) > maxDNSSearchListChars {
		kept, cut = kept[:len(kept)-1], true
	}
	return kept, cut
}
