package config

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// entry describes one value for display: its key (the KubeletConfiguration JSON
// name, or a name of ours for flag-only values), the dotted file field that sets
// it ("" for flag-only values), and how to show it.
type entry struct {
	key   string
	field string
	value func(*Config) string
}

func str(f func(*Config) string) func(*Config) string { return f }

func dur(f func(*Config) time.Duration) func(*Config) string {
	return func(c *Config) string { return f(c).String() }
}

func num[T ~int32 | ~int64](f func(*Config) T) func(*Config) string {
	return func(c *Config) string { return fmt.Sprint(f(c)) }
}

func boolean(f func(*Config) bool) func(*Config) string {
	return func(c *Config) string { return fmt.Sprint(f(c)) }
}

func kv[V string | []string](f func(*Config) map[string]V) func(*Config) string {
	return func(c *Config) string {
		m := f(c)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
		}
		return strings.Join(parts, ",")
	}
}

// redactedHeader shows header names only: values are often credentials
// (Authorization), and the config is printed and logged.
func redactedHeader(f func(*Config) map[string][]string) func(*Config) string {
	return func(c *Config) string {
		m := f(c)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+"=(redacted)")
		}
		return strings.Join(parts, ",")
	}
}

// redactURL hides a password in a URL ("xxxxx").
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

var entries = []entry{
	{"configFile", "", str(func(c *Config) string { return c.ConfigFile })},
	{"nodeName", "", str(func(c *Config) string { return c.NodeName })},
	{"nodeIP", "", str(func(c *Config) string { return c.NodeIP })},
	{"kubeconfig", "", str(func(c *Config) string { return c.Kubeconfig })},
	{"rootDir", "", str(func(c *Config) string { return c.RootDir })},
	{"runDir", "", str(func(c *Config) string { return c.RunDir })},
	{"staticPodPath", "staticPodPath", str(func(c *Config) string { return c.StaticPodPath })},
	{"staticPodURL", "staticPodURL", str(func(c *Config) string { return redactURL(c.StaticPodURL) })},
	{"staticPodURLHeader", "staticPodURLHeader", redactedHeader(func(c *Config) map[string][]string { return c.StaticPodURLHeader })},
	{"manifestURLCA", "", str(func(c *Config) string { return c.StaticPodURLCA })},
	{"fileCheckFrequency", "fileCheckFrequency", dur(func(c *Config) time.Duration { return c.FileCheckFrequency })},
	{"httpCheckFrequency", "httpCheckFrequency", dur(func(c *Config) time.Duration { return c.HTTPCheckFrequency })},
	{"syncFrequency", "syncFrequency", dur(func(c *Config) time.Duration { return c.SyncFrequency })},
	{"address", "address", str(func(c *Config) string { return c.Address })},
	{"port", "port", num(func(c *Config) int32 { return c.Port })},
	{"readOnlyPort", "readOnlyPort", num(func(c *Config) int32 { return c.ReadOnlyPort })},
	{"tlsCertFile", "tlsCertFile", str(func(c *Config) string { return c.TLSCertFile })},
	{"tlsPrivateKeyFile", "tlsPrivateKeyFile", str(func(c *Config) string { return c.TLSPrivateKeyFile })},
	{"authentication.x509.clientCAFile", "authentication.x509.clientCAFile", str(func(c *Config) string { return c.ClientCAFile })},
	{"tlsMinVersion", "tlsMinVersion", str(func(c *Config) string { return c.TLSMinVersion })},
	{"tlsCipherSuites", "tlsCipherSuites", str(func(c *Config) string { return strings.Join(c.TLSCipherSuites, ",") })},
	{"authentication.anonymous.enabled", "authentication.anonymous.enabled", boolean(func(c *Config) bool { return c.AnonymousAuth })},
	{"authentication.webhook.enabled", "authentication.webhook.enabled", boolean(func(c *Config) bool { return c.WebhookAuthn })},
	{"authentication.webhook.cacheTTL", "authentication.webhook.cacheTTL", dur(func(c *Config) time.Duration { return c.WebhookAuthnCacheTTL })},
	{"authorization.mode", "authorization.mode", str(func(c *Config) string { return c.AuthorizationMode })},
	{"authorization.webhook.cacheAuthorizedTTL", "authorization.webhook.cacheAuthorizedTTL", dur(func(c *Config) time.Duration { return c.AuthzCacheAuthorized })},
	{"authorization.webhook.cacheUnauthorizedTTL", "authorization.webhook.cacheUnauthorizedTTL", dur(func(c *Config) time.Duration { return c.AuthzCacheUnauthorized })},
	{"podLogsDir", "podLogsDir", str(func(c *Config) string { return c.PodLogsDir })},
	{"containerLogMaxSize", "containerLogMaxSize", str(func(c *Config) string {
		return resource.NewQuantity(c.ContainerLogMaxSize, resource.BinarySI).String()
	})},
	{"containerLogMaxFiles", "containerLogMaxFiles", num(func(c *Config) int32 { return c.ContainerLogMaxFiles })},
	{"cgroupRoot", "cgroupRoot", str(func(c *Config) string { return c.CgroupRoot })},
	{"cgroupDriver", "cgroupDriver", str(func(c *Config) string { return c.CgroupDriver })},
	{"cniConfDir", "", str(func(c *Config) string { return c.CNIConfDir })},
	{"cniBinDir", "", str(func(c *Config) string { return strings.Join(c.CNIBinDirs, ",") })},
	{"cniCacheDir", "", str(func(c *Config) string { return c.CNICacheDir })},
	{"podCIDR", "podCIDR", str(func(c *Config) string { return c.PodCIDR })},
	{"podNetworkBridge", "", str(func(c *Config) string { return c.PodNetworkBridge })},
	{"resolvConf", "resolvConf", str(func(c *Config) string { return c.ResolvConf })},
	{"evictionHard", "evictionHard", kv(func(c *Config) map[string]string { return c.EvictionHard })},
	{"evictionSoft", "evictionSoft", kv(func(c *Config) map[string]string { return c.EvictionSoft })},
	{"evictionSoftGracePeriod", "evictionSoftGracePeriod", kv(func(c *Config) map[string]string { return c.EvictionSoftGracePeriod })},
	{"evictionMinimumReclaim", "evictionMinimumReclaim", kv(func(c *Config) map[string]string { return c.EvictionMinimumReclaim })},
	{"evictionPressureTransitionPeriod", "evictionPressureTransitionPeriod", dur(func(c *Config) time.Duration { return c.EvictionPressureTransitionPeriod })},
	{"evictionMaxPodGracePeriod", "evictionMaxPodGracePeriod", num(func(c *Config) int32 { return c.EvictionMaxPodGracePeriod })},
	{"failSwapOn", "failSwapOn", boolean(func(c *Config) bool { return c.FailSwapOn })},
	{"serializeImagePulls", "serializeImagePulls", boolean(func(c *Config) bool { return c.SerializeImagePulls })},
	{"maxParallelImagePulls", "maxParallelImagePulls", num(func(c *Config) int32 { return c.MaxParallelImagePulls })},
	{"registryConfigDir", "", str(func(c *Config) string { return c.RegistryConfigDir })},
	{"imagePullProgressTimeout", "", dur(func(c *Config) time.Duration { return c.ImagePullProgressTimeout })},
	{"imageGCHighThresholdPercent", "imageGCHighThresholdPercent", num(func(c *Config) int32 { return c.ImageGCHighThresholdPercent })},
	{"imageGCLowThresholdPercent", "imageGCLowThresholdPercent", num(func(c *Config) int32 { return c.ImageGCLowThresholdPercent })},
	{"imageMinimumGCAge", "imageMinimumGCAge", dur(func(c *Config) time.Duration { return c.ImageMinimumGCAge })},
	{"imageMaximumGCAge", "imageMaximumGCAge", dur(func(c *Config) time.Duration { return c.ImageMaximumGCAge })},
	{"seccompDefault", "seccompDefault", boolean(func(c *Config) bool { return c.SeccompDefault })},
	{"allowedUnsafeSysctls", "allowedUnsafeSysctls", str(func(c *Config) string { return strings.Join(c.AllowedUnsafeSysctls, ",") })},
	{"maxPods", "maxPods", num(func(c *Config) int32 { return c.MaxPods })},
	{"podPidsLimit", "podPidsLimit", num(func(c *Config) int64 { return c.PodPidsLimit })},
	{"crashLoopBackOff.maxContainerRestartPeriod", "crashLoopBackOff.maxContainerRestartPeriod", dur(func(c *Config) time.Duration { return c.MaxContainerRestartPeriod })},
	{"registerNode", "registerNode", boolean(func(c *Config) bool { return c.RegisterNode })},
	{"registerWithTaints", "registerWithTaints", str(func(c *Config) string {
		parts := make([]string, 0, len(c.RegisterWithTaints))
		for _, t := range c.RegisterWithTaints {
			parts = append(parts, t.ToString())
		}
		return strings.Join(parts, ",")
	})},
	{"nodeStatusUpdateFrequency", "nodeStatusUpdateFrequency", dur(func(c *Config) time.Duration { return c.NodeStatusUpdateFrequency })},
	{"nodeStatusReportFrequency", "nodeStatusReportFrequency", dur(func(c *Config) time.Duration { return c.NodeStatusReportFrequency })},
	{"nodeLeaseDurationSeconds", "nodeLeaseDurationSeconds", num(func(c *Config) int32 { return c.NodeLeaseDurationSeconds })},
}
