package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	utilsysctl "k8s.io/component-helpers/node/util/sysctl"

	"github.com/staticpodd/staticpodd/agent/eviction"
)

// validate checks the values staticpodd uses, with the kubelet's limits where it
// has them (pkg/kubelet/apis/config/validation).
func (c *Config) validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.Port < 1 || c.Port > 65535 {
		bad("port", "%d is not between 1 and 65535", c.Port)
	}
	if c.ReadOnlyPort < 0 || c.ReadOnlyPort > 65535 {
		bad("readOnlyPort", "%d is not between 0 and 65535", c.ReadOnlyPort)
	}
	for _, s := range c.AllowedUnsafeSysctls {
		// The kubelet's sysctl.NewAllowlist.
		if ns, name, _ := utilsysctl.GetNamespace(s); ns == utilsysctl.UnknownNamespace {
			bad("allowedUnsafeSysctls", "the sysctls %q are not known to be namespaced", name)
		}
	}
	if net.ParseIP(c.Address) == nil {
		bad("address", "%q is not an IP address", c.Address)
	}
	for _, ip := range strings.Split(c.NodeIP, ",") {
		if c.NodeIP != "" && net.ParseIP(strings.TrimSpace(ip)) == nil {
			bad("nodeIP", "%q is not an IP address", ip)
		}
	}
	for key, d := range map[string]time.Duration{
		"fileCheckFrequency": c.FileCheckFrequency, "httpCheckFrequency": c.HTTPCheckFrequency,
		"syncFrequency": c.SyncFrequency, "evictionPressureTransitionPeriod": c.EvictionPressureTransitionPeriod,
		"crashLoopBackOff.maxContainerRestartPeriod": c.MaxContainerRestartPeriod,
		"nodeStatusUpdateFrequency":                  c.NodeStatusUpdateFrequency, "nodeStatusReportFrequency": c.NodeStatusReportFrequency,
	} {
		if d < 0 {
			bad(key, "%v is negative", d)
		}
	}
	if c.NodeLeaseDurationSeconds <= 0 {
		bad("nodeLeaseDurationSeconds", "%d is not positive", c.NodeLeaseDurationSeconds)
	}
	if c.StaticPodURL != "" {
		// The kubelet takes any string and fails every poll; a URL that can
		// never be fetched is refused up front.
		u, err := url.Parse(c.StaticPodURL)
		switch {
		case err != nil:
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // without the URL, which may hold a password
			}
			bad("staticPodURL", "%v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			bad("staticPodURL", "%q: want an http:// or https:// URL", redactURL(c.StaticPodURL))
		case u.Host == "":
			bad("staticPodURL", "%q has no host", redactURL(c.StaticPodURL))
		}
	}
	if c.StaticPodURLCA != "" && c.StaticPodURL == "" {
		bad("manifestURLCA", "--%s is given but there is no staticPodURL", FlagManifestURLCA)
	}
	if _, err := c.EvictionThresholds(); err != nil {
		errs = append(errs, err)
	}
	if c.EvictionMaxPodGracePeriod < 0 {
		bad("evictionMaxPodGracePeriod", "%d is negative", c.EvictionMaxPodGracePeriod)
	}
	if c.CgroupDriver != "cgroupfs" && c.CgroupDriver != "systemd" {
		bad("cgroupDriver", "%q is neither cgroupfs nor systemd", c.CgroupDriver)
	}
	if c.CgroupRoot != "" && !filepath.IsAbs(c.CgroupRoot) {
		bad("cgroupRoot", "%q is not an absolute path", c.CgroupRoot)
	}
	if c.ContainerLogMaxFiles < 2 {
		bad("containerLogMaxFiles", "%d is less than 2", c.ContainerLogMaxFiles)
	}
	// Negative turns rotation off, as the kubelet's NewContainerLogManager
	// takes it; 0 would give each line a file of its own.
	if c.ContainerLogMaxSize == 0 {
		bad("containerLogMaxSize", "0 would rotate at every line (a negative size turns rotation off)")
	}
	if p := c.ImageGCHighThresholdPercent; p < 0 || p > 100 {
		bad("imageGCHighThresholdPercent", "%d is not between 0 and 100", p)
	}
	if p := c.ImageGCLowThresholdPercent; p < 0 || p > 100 {
		bad("imageGCLowThresholdPercent", "%d is not between 0 and 100", p)
	}
	if c.ImageGCLowThresholdPercent > c.ImageGCHighThresholdPercent {
		bad("imageGCLowThresholdPercent", "%d is above imageGCHighThresholdPercent %d",
			c.ImageGCLowThresholdPercent, c.ImageGCHighThresholdPercent)
	}
	// ValidateKubeletConfiguration
	if c.ImageMinimumGCAge < 0 {
		bad("imageMinimumGCAge", "%v is negative", c.ImageMinimumGCAge)
	}
	if c.ImageMaximumGCAge < 0 {
		bad("imageMaximumGCAge", "%v must not be negative", c.ImageMaximumGCAge)
	}
	if c.ImageMaximumGCAge > 0 && c.ImageMaximumGCAge <= c.ImageMinimumGCAge {
		bad("imageMaximumGCAge", "%v must be greater than imageMinimumGCAge %v", c.ImageMaximumGCAge, c.ImageMinimumGCAge)
	}
	if c.MaxPods < 0 {
		bad("maxPods", "%d is negative", c.MaxPods)
	}
	for key, dir := range map[string]string{"podLogsDir": c.PodLogsDir, "rootDir": c.RootDir, "runDir": c.RunDir} {
		if !filepath.IsAbs(dir) {
			bad(key, "%q is not an absolute path", dir)
		}
	}
	if _, err := TLSVersion(c.TLSMinVersion); err != nil {
		bad("tlsMinVersion", "%v", err)
	}
	if _, err := CipherSuites(c.TLSCipherSuites); err != nil {
		bad("tlsCipherSuites", "%v", err)
	}
	if c.AuthorizationMode != "AlwaysAllow" && c.AuthorizationMode != "Webhook" {
		bad("authorization.mode", "%q is neither AlwaysAllow nor Webhook", c.AuthorizationMode)
	}
	for key, d := range map[string]time.Duration{
		"authentication.webhook.cacheTTL":            c.WebhookAuthnCacheTTL,
		"authorization.webhook.cacheAuthorizedTTL":   c.AuthzCacheAuthorized,
		"authorization.webhook.cacheUnauthorizedTTL": c.AuthzCacheUnauthorized,
	} {
		if d < 0 {
			bad(key, "%v is negative", d)
		}
	}
	return errors.Join(errs...)
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
