package config

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/staticpodd/staticpodd/agent/eviction"
)

// validate checks the values staticpodd uses, with the kubelet's limits where it
// has them (pkg/kubelet/apis/config/validation).
func (c *Config) validate() error {
	var p problems
	for _, f := range fields {
		if f.check != nil {
			p.key = f.key
			f.check(c, &p)
		}
	}
	return errors.Join(p.errs...)
}

// TLSVersion is the TLS version named as the kubelet's tlsMinVersion names
// it (VersionTLS12); "" is 0, Go's default (TLS 1.2 for a server).
// It follows component-base's cliflag.TLSVersion.
func TLSVersion(name string) (uint16, error) {
	if name == "" {
		return 0, nil
	}
	v, ok := map[string]uint16{"VersionTLS10": tls.VersionTLS10, "VersionTLS11": tls.VersionTLS11,
		"VersionTLS12": tls.VersionTLS12, "VersionTLS13": tls.VersionTLS13}[name]
	if !ok {
		return 0, fmt.Errorf("%q is not one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13", name)
	}
	return v, nil
}

// CipherSuites are the IDs of the cipher suites named as Go names them
// (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256), insecure ones included, as
// component-base's cliflag.TLSCipherSuites accepts them; none is Go's default.
func CipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	known := map[string]uint16{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[cs.Name] = cs.ID
	}
	ids := make([]uint16, 0, len(names))
	for _, n := range names {
		id, ok := known[n]
		if !ok {
			return nil, fmt.Errorf("%q is not a cipher suite Go knows", n)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// EvictionThresholds are the eviction thresholds of evictionHard,
// evictionSoft, evictionSoftGracePeriod and evictionMinimumReclaim; an error
// names the field, the signal and what is wrong.
func (c *Config) EvictionThresholds() ([]eviction.Threshold, error) {
	return eviction.Parse(c.EvictionHard, c.EvictionSoft, c.EvictionSoftGracePeriod, c.EvictionMinimumReclaim)
}
