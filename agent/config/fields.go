package config

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// Reload says how a running daemon takes a changed value: at its next start,
// or live, by the part of the daemon that owns the value's group.
type Reload uint8

const (
	// Restart: read once at start; a reload reports the change as needing a
	// restart and keeps the running value.
	Restart Reload = iota
	// ReloadSources: the manifest sources, replaced where they changed
	// (fileCheckFrequency alone only changes the file source's period).
	ReloadSources
	// ReloadEviction: the eviction manager's thresholds and periods.
	ReloadEviction
	// ReloadLogs: container log rotation, for running containers too.
	ReloadLogs
	// ReloadImageGC: the image garbage collector's policy.
	ReloadImageGC
)

func (r Reload) String() string {
	return [...]string{"restart", "sources", "eviction", "logs", "imageGC"}[r]
}

// field declares one value of Config, once: everything else (loading from
// the file, staticpodd's defaults, flags, origins, validation, what `config`
// shows, what a reload applies) is driven by the table of them, fields.
// To add a value: a Config field, and a row here.
type field struct {
	// key names the value in `staticpodd config`, in Origins and in errors:
	// the KubeletConfiguration's dotted JSON path, or a name of ours for a
	// value no file field gives.
	key string
	// file is the dotted KubeletConfiguration field that sets the value,
	// "" for none.
	file string
	// value is the typed Config field (how it is shown, copied, and read
	// from the file).
	value valuer
	// fill, when set, gives staticpodd's default after the kubelet's
	// (setDefaults), and may say in Origins where it came from; set says
	// whether the file sets the field.
	fill func(c *Config, kc *kubeletConfiguration, set bool)
	// flag is the flag that sets the value, "" for none; flagValue is where
	// Flags holds it (flagList for a repeatable one), and help its help
	// text. shared: the root command declares the flag for every
	// subcommand, so Register leaves it out. byLoad: Load itself takes the
	// flag (--config names the file), it sets no value.
	flag      string
	flagValue func(*Flags) *string
	flagList  func(*Flags) *[]string
	help      string
	shared    bool
	byLoad    bool
	// parseFlag sets the value from the flag's (parseList from a
	// repeatable one's); nil: the value is the flag's string as given.
	parseFlag func(c *Config, v string) error
	parseList func(c *Config, vs []string) error
	// env is the environment variable that gives the value when no flag
	// does.
	env string
	// check validates the value, with the kubelet's limits where it has
	// them; cross-field rules sit with the field whose key they report.
	check func(c *Config, p *problems)
	// reload: how a running daemon takes a change.
	reload Reload
}

// Renderings of values for `staticpodd config`.

// Checks shared by several fields.

// fields are every value of Config, in the order `staticpodd config` shows
// them. Validation runs in this order too.
var fields = []field{
	{key: "configFile", flag: FlagConfig, help: "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1)",
		flagValue: func(f *Flags) *string { return &f.ConfigFile }, byLoad: true,
		value: value[string]{at: func(c *Config) *string { return &c.ConfigFile }, render: plain}},
	{key: "missingConfig", help: "the kubelet personality's --config file when it is not there yet: the CRI is served alone until it is",
		value: value[string]{at: func(c *Config) *string { return &c.MissingConfig }, render: plain}},
	{key: "nodeName", flag: FlagHostnameOverride, help: "node name (default: the hostname, lower-cased)",
		flagValue: func(f *Flags) *string { return &f.HostnameOverride },
		// The kubelet lower-cases the override as well as the hostname
		// (GetHostname); a blank one is no override (applyFlags).
		parseFlag: func(c *Config, v string) error {
			c.NodeName = strings.ToLower(strings.TrimSpace(v))
			return nil
		},
		value: value[string]{at: func(c *Config) *string { return &c.NodeName }, render: plain}},
	{key: "nodeIP", flag: FlagNodeIP, help: "IP address of the node",
		flagValue: func(f *Flags) *string { return &f.NodeIP },
		value:     value[string]{at: func(c *Config) *string { return &c.NodeIP }, render: plain},
		check: func(c *Config, p *problems) {
			for _, ip := range strings.Split(c.NodeIP, ",") {
				if c.NodeIP != "" && net.ParseIP(strings.TrimSpace(ip)) == nil {
					p.bad("%q is not an IP address", ip)
				}
			}
		}},
	{key: "nodeLabels", flag: FlagNodeLabels, help: "labels of the Node when staticpodd registers it: key=value pairs separated by ','; repeatable",
		flagList: func(f *Flags) *[]string { return &f.NodeLabels },
		parseList: func(c *Config, vs []string) error {
			// cliflag.ConfigurationMap: a pair without '=' is a key with an
			// empty value; a later pair wins.
			c.NodeLabels = map[string]string{}
			for _, v := range vs {
				for _, pair := range strings.Split(v, ",") {
					if strings.TrimSpace(pair) == "" {
						continue
					}
					k, val, _ := strings.Cut(pair, "=")
					c.NodeLabels[strings.TrimSpace(k)] = strings.TrimSpace(val)
				}
			}
			return nil
		},
		value: value[map[string]string]{at: func(c *Config) *map[string]string { return &c.NodeLabels }, render: kv},
		check: checkNodeLabels},
	{key: "kubeconfig", flag: FlagKubeconfig, help: "kubeconfig of an API server; enables mirror pods",
		flagValue: func(f *Flags) *string { return &f.Kubeconfig },
		value:     value[string]{at: func(c *Config) *string { return &c.Kubeconfig }, render: plain}},
	{key: "bootstrapKubeconfig", flag: FlagBootstrapKubeconfig,
		help:      "kubeconfig whose credentials request the node's client certificate (a CSR) when --kubeconfig has none valid; --kubeconfig is then written to use it (TLS bootstrap)",
		flagValue: func(f *Flags) *string { return &f.BootstrapKubecfg },
		value:     value[string]{at: func(c *Config) *string { return &c.BootstrapKubeconfig }, render: plain},
		check: func(c *Config, p *problems) {
			if c.BootstrapKubeconfig != "" && c.Kubeconfig == "" {
				p.bad("needs --%s: the file TLS bootstrap writes", FlagKubeconfig)
			}
		}},
	{key: "rootDir", flag: FlagRootDir, shared: true, env: EnvRootDir,
		flagValue: func(f *Flags) *string { return &f.RootDir },
		value:     value[string]{at: func(c *Config) *string { return &c.RootDir }, render: plain, def: constant(DefaultRootDir)},
		check:     absolute(func(c *Config) string { return c.RootDir })},
	{key: "runDir", flag: FlagRunDir, shared: true, env: EnvRunDir,
		flagValue: func(f *Flags) *string { return &f.RunDir },
		value:     value[string]{at: func(c *Config) *string { return &c.RunDir }, render: plain, def: constant(DefaultRunDir)},
		check:     absolute(func(c *Config) string { return c.RunDir })},
	{key: "certDir", flag: FlagCertDir, help: "directory of the node's certificates: its client certificate (kubelet-client-current.pem) and the node API's self-signed serving certificate when tlsCertFile is not given (default <root-dir>/pki)",
		flagValue: func(f *Flags) *string { return &f.CertDir },
		value:     value[string]{at: func(c *Config) *string { return &c.CertDir }, render: plain},
		check:     absolute(func(c *Config) string { return c.CertDir })},
	{key: "containerRuntimeEndpoint", file: "containerRuntimeEndpoint",
		value: value[string]{at: func(c *Config) *string { return &c.ContainerRuntimeEndpoint }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.ContainerRuntimeEndpoint })},
		// The kubelet's default is containerd's socket; staticpodd's is its
		// own, which Load fills in once the run dir is known.
		fill: func(c *Config, _ *kubeletConfiguration, set bool) {
			if !set {
				c.ContainerRuntimeEndpoint = ""
			}
		},
		check: ownCRISocket(func(c *Config) string { return c.ContainerRuntimeEndpoint })},
	{key: "imageServiceEndpoint", file: "imageServiceEndpoint",
		value: value[string]{at: func(c *Config) *string { return &c.ImageServiceEndpoint }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.ImageServiceEndpoint })},
		check: ownCRISocket(func(c *Config) string { return c.ImageServiceEndpoint })},

	{key: "staticPodPath", file: "staticPodPath", reload: ReloadSources,
		flag: FlagPodManifestPath, help: "directory of static pod manifests, or one manifest file (staticPodPath; default " + DefaultStaticPodPath + ")",
		flagValue: func(f *Flags) *string { return &f.PodManifestPath },
		value: value[string]{at: func(c *Config) *string { return &c.StaticPodPath }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.StaticPodPath })},
		// The kubelet has no default and runs no static pods without one;
		// staticPodPath: "" in the file keeps it so.
		fill: func(c *Config, _ *kubeletConfiguration, set bool) {
			if c.StaticPodPath == "" && !set {
				c.StaticPodPath = DefaultStaticPodPath
			}
		}},
	{key: "staticPodURL", file: "staticPodURL", reload: ReloadSources,
		flag: FlagManifestURL, help: "URL of a Pod or PodList to run (staticPodURL)",
		flagValue: func(f *Flags) *string { return &f.ManifestURL },
		value: value[string]{at: func(c *Config) *string { return &c.StaticPodURL }, render: redactURL,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.StaticPodURL })},
		check: func(c *Config, p *problems) {
			if c.StaticPodURL == "" {
				return
			}
			// The kubelet takes any string and fails every poll; a URL that can
			// never be fetched is refused up front.
			u, err := url.Parse(c.StaticPodURL)
			switch {
			case err != nil:
				var ue *url.Error
				if errors.As(err, &ue) {
					err = ue.Err // without the URL, which may hold a password
				}
				p.bad("%v", err)
			case u.Scheme != "http" && u.Scheme != "https":
				p.bad("%q: want an http:// or https:// URL", redactURL(c.StaticPodURL))
			case u.Host == "":
				p.bad("%q has no host", redactURL(c.StaticPodURL))
			}
		}},
	{key: "staticPodURLHeader", file: "staticPodURLHeader", reload: ReloadSources,
		// Keys as written.
		flag: FlagManifestURLHeader, help: "HTTP header 'Key:Value' for --manifest-url (staticPodURLHeader); repeatable, comma-separated pairs allowed",
		flagList: func(f *Flags) *[]string { return &f.ManifestURLHeaders },
		parseList: func(c *Config, vs []string) error {
			h, err := ParseHeaders(vs)
			if err != nil {
				return err
			}
			c.StaticPodURLHeader = h
			return nil
		},
		value: value[http.Header]{at: func(c *Config) *http.Header { return &c.StaticPodURLHeader }, render: redactedHeader,
			kubelet: kubelet(func(kc *kubeletConfiguration) http.Header { return http.Header(kc.StaticPodURLHeader) })}},
	{key: "manifestURLCA", flag: FlagManifestURLCA, help: "PEM file of CA certificates trusted for an https --manifest-url, besides the system's",
		flagValue: func(f *Flags) *string { return &f.ManifestURLCA },
		value:     value[string]{at: func(c *Config) *string { return &c.StaticPodURLCA }, render: plain},
		check: func(c *Config, p *problems) {
			if c.StaticPodURLCA != "" && c.StaticPodURL == "" {
				p.bad("--%s is given but there is no staticPodURL", FlagManifestURLCA)
			}
		}},
	{key: "credentialsDirectory", flag: FlagCredentialsDirectory, env: EnvCredentialsDirectory,
		help:      "directory of the credentials Secrets take values from (annotation staticpodd.io/credentials: key=credential, ...) (default $" + EnvCredentialsDirectory + ", which systemd sets for a unit with LoadCredential= or LoadCredentialEncrypted=)",
		flagValue: func(f *Flags) *string { return &f.CredentialsDir },
		value:     value[string]{at: func(c *Config) *string { return &c.CredentialsDirectory }, render: plain},
		check: func(c *Config, p *problems) {
			if c.CredentialsDirectory != "" && !filepath.IsAbs(c.CredentialsDirectory) {
				p.bad("%q is not an absolute path", c.CredentialsDirectory)
			}
		}},
	{key: "fileCheckFrequency", file: "fileCheckFrequency", reload: ReloadSources,
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.FileCheckFrequency }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration { return kc.FileCheckFrequency.Duration })},
		check: notNegative(func(c *Config) time.Duration { return c.FileCheckFrequency })},
	{key: "httpCheckFrequency", file: "httpCheckFrequency", reload: ReloadSources,
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.HTTPCheckFrequency }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration { return kc.HTTPCheckFrequency.Duration })},
		check: notNegative(func(c *Config) time.Duration { return c.HTTPCheckFrequency })},
	{key: "syncFrequency", file: "syncFrequency",
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.SyncFrequency }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration { return kc.SyncFrequency.Duration })},
		check: notNegative(func(c *Config) time.Duration { return c.SyncFrequency })},

	{key: "address", file: "address",
		value: value[string]{at: func(c *Config) *string { return &c.Address }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.Address })},
		check: func(c *Config, p *problems) {
			if net.ParseIP(c.Address) == nil {
				p.bad("%q is not an IP address", c.Address)
			}
		}},
	{key: "port", file: "port",
		value: value[int32]{at: func(c *Config) *int32 { return &c.Port }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return kc.Port })},
		check: func(c *Config, p *problems) {
			if c.Port < 1 || c.Port > 65535 {
				p.bad("%d is not between 1 and 65535", c.Port)
			}
		}},
	{key: "readOnlyPort", file: "readOnlyPort",
		value: value[int32]{at: func(c *Config) *int32 { return &c.ReadOnlyPort }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return kc.ReadOnlyPort })},
		check: func(c *Config, p *problems) {
			if c.ReadOnlyPort < 0 || c.ReadOnlyPort > 65535 {
				p.bad("%d is not between 0 and 65535", c.ReadOnlyPort)
			}
		}},
	{key: "healthzPort", file: "healthzPort",
		value: value[int32]{at: func(c *Config) *int32 { return &c.HealthzPort }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return *kc.HealthzPort })},
		// ValidateKubeletConfiguration's range; 0 turns the port off.
		check: func(c *Config, p *problems) {
			if c.HealthzPort < 0 || c.HealthzPort > 65535 {
				p.bad("%d is not between 0 and 65535", c.HealthzPort)
			}
		}},
	{key: "healthzBindAddress", file: "healthzBindAddress",
		value: value[string]{at: func(c *Config) *string { return &c.HealthzBindAddress }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.HealthzBindAddress })},
		check: func(c *Config, p *problems) {
			if c.HealthzPort != 0 && net.ParseIP(c.HealthzBindAddress) == nil {
				p.bad("%q is not an IP address", c.HealthzBindAddress)
			}
		}},
	{key: "tlsCertFile", file: "tlsCertFile",
		value: value[string]{at: func(c *Config) *string { return &c.TLSCertFile }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.TLSCertFile })}},
	{key: "tlsPrivateKeyFile", file: "tlsPrivateKeyFile",
		value: value[string]{at: func(c *Config) *string { return &c.TLSPrivateKeyFile }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.TLSPrivateKeyFile })}},
	{key: "authentication.x509.clientCAFile", file: "authentication.x509.clientCAFile",
		value: value[string]{at: func(c *Config) *string { return &c.ClientCAFile }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.Authentication.X509.ClientCAFile })}},
	{key: "tlsMinVersion", file: "tlsMinVersion",
		value: value[string]{at: func(c *Config) *string { return &c.TLSMinVersion }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.TLSMinVersion })},
		check: func(c *Config, p *problems) {
			if _, err := TLSVersion(c.TLSMinVersion); err != nil {
				p.bad("%v", err)
			}
		}},
	{key: "tlsCipherSuites", file: "tlsCipherSuites",
		value: value[[]string]{at: func(c *Config) *[]string { return &c.TLSCipherSuites }, render: commas,
			kubelet: kubelet(func(kc *kubeletConfiguration) []string { return kc.TLSCipherSuites })},
		check: func(c *Config, p *problems) {
			if _, err := CipherSuites(c.TLSCipherSuites); err != nil {
				p.bad("%v", err)
			}
		}},
	{key: "authentication.anonymous.enabled", file: "authentication.anonymous.enabled",
		value: value[bool]{at: func(c *Config) *bool { return &c.AnonymousAuth }, render: sprint[bool],
			kubelet: kubelet(func(kc *kubeletConfiguration) bool { return *kc.Authentication.Anonymous.Enabled })}},
	{key: "authentication.webhook.enabled", file: "authentication.webhook.enabled",
		value: value[bool]{at: func(c *Config) *bool { return &c.WebhookAuthn }, render: sprint[bool],
			kubelet: kubelet(func(kc *kubeletConfiguration) bool { return *kc.Authentication.Webhook.Enabled })}},
	{key: "authentication.webhook.cacheTTL", file: "authentication.webhook.cacheTTL",
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.WebhookAuthnCacheTTL }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration { return kc.Authentication.Webhook.CacheTTL.Duration })},
		check: notNegative(func(c *Config) time.Duration { return c.WebhookAuthnCacheTTL })},
	{key: "authorization.mode", file: "authorization.mode",
		value: value[string]{at: func(c *Config) *string { return &c.AuthorizationMode }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return string(kc.Authorization.Mode) })},
		check: oneOf(func(c *Config) string { return c.AuthorizationMode }, "AlwaysAllow", "Webhook")},
	{key: "authorization.webhook.cacheAuthorizedTTL", file: "authorization.webhook.cacheAuthorizedTTL",
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.AuthzCacheAuthorized }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration {
				return kc.Authorization.Webhook.CacheAuthorizedTTL.Duration
			})},
		check: notNegative(func(c *Config) time.Duration { return c.AuthzCacheAuthorized })},
	{key: "authorization.webhook.cacheUnauthorizedTTL", file: "authorization.webhook.cacheUnauthorizedTTL",
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.AuthzCacheUnauthorized }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration {
				return kc.Authorization.Webhook.CacheUnauthorizedTTL.Duration
			})},
		check: notNegative(func(c *Config) time.Duration { return c.AuthzCacheUnauthorized })},

	{key: "podLogsDir", file: "podLogsDir",
		value: value[string]{at: func(c *Config) *string { return &c.PodLogsDir }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.PodLogsDir })},
		check: absolute(func(c *Config) string { return c.PodLogsDir })},
	{key: "containerLogMaxSize", file: "containerLogMaxSize", reload: ReloadLogs,
		value: value[int64]{at: func(c *Config) *int64 { return &c.ContainerLogMaxSize }, render: quantity,
			kubelet: func(kc *kubeletConfiguration) (int64, error) {
				size, err := resource.ParseQuantity(kc.ContainerLogMaxSize)
				if err != nil {
					return 0, fmt.Errorf("containerLogMaxSize %q: %w", kc.ContainerLogMaxSize, err)
				}
				return size.Value(), nil
			}},
		// Negative turns rotation off, as the kubelet's NewContainerLogManager
		// takes it; 0 would give each line a file of its own.
		check: func(c *Config, p *problems) {
			if c.ContainerLogMaxSize == 0 {
				p.bad("0 would rotate at every line (a negative size turns rotation off)")
			}
		}},
	{key: "containerLogMaxFiles", file: "containerLogMaxFiles", reload: ReloadLogs,
		value: value[int32]{at: func(c *Config) *int32 { return &c.ContainerLogMaxFiles }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return *kc.ContainerLogMaxFiles })},
		check: func(c *Config, p *problems) {
			if c.ContainerLogMaxFiles < 2 {
				p.bad("%d is less than 2", c.ContainerLogMaxFiles)
			}
		}},
	{key: "cgroupRoot", file: "cgroupRoot",
		value: value[string]{at: func(c *Config) *string { return &c.CgroupRoot }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.CgroupRoot })},
		fill: func(c *Config, _ *kubeletConfiguration, set bool) {
			if c.CgroupRoot == "" && !set {
				c.CgroupRoot = DefaultCgroupRoot
			}
		},
		check: func(c *Config, p *problems) {
			if c.CgroupRoot != "" && !filepath.IsAbs(c.CgroupRoot) {
				p.bad("%q is not an absolute path", c.CgroupRoot)
			}
		}},
	{key: "cgroupDriver", file: "cgroupDriver",
		value: value[string]{at: func(c *Config) *string { return &c.CgroupDriver }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.CgroupDriver })},
		// Unset, the driver is the host's: systemd where systemd is init. The
		// kubelet's file default is cgroupfs, but the kubelet takes the driver
		// from its runtime (getCgroupDriverFromCRI), and staticpodd is that
		// runtime; under systemd, pods in scopes are what lets a power-off
		// stop them within their grace period, not systemd-shutdown's 90s.
		fill: func(c *Config, _ *kubeletConfiguration, set bool) {
			if set {
				return
			}
			c.CgroupDriver, c.Origins["cgroupDriver"] = "cgroupfs", OriginDefault+" (systemd is not init)"
			if systemdBooted() {
				c.CgroupDriver, c.Origins["cgroupDriver"] = "systemd", OriginDefault+" (systemd is init)"
			}
		},
		check: oneOf(func(c *Config) string { return c.CgroupDriver }, "cgroupfs", "systemd")},

	{key: "cniConfDir", flag: FlagCNIConfDir, help: "directory of CNI configuration: its first .conflist, .conf or .json file by name is the pod network (default " + DefaultCNIConfDir + "; none there: the built-in default network)",
		flagValue: func(f *Flags) *string { return &f.CNIConfDir },
		value:     value[string]{at: func(c *Config) *string { return &c.CNIConfDir }, render: plain, def: constant(DefaultCNIConfDir)}},
	{key: "cniBinDir", flag: FlagCNIBinDir, help: "comma-separated directories of CNI plugins (default " + strings.Join(DefaultCNIBinDirs, ",") + ")",
		flagValue: func(f *Flags) *string { return &f.CNIBinDir },
		value: value[[]string]{at: func(c *Config) *[]string { return &c.CNIBinDirs }, render: commas,
			def: func() []string { return slices.Clone(DefaultCNIBinDirs) }},
		parseFlag: func(c *Config, v string) error {
			c.CNIBinDirs = nil
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" {
					c.CNIBinDirs = append(c.CNIBinDirs, d)
				}
			}
			return nil
		}},
	{key: "cniCacheDir", flag: FlagCNICacheDir, help: "libcni's cache of pod network attachments (default <run-dir>/cni/cache)",
		flagValue: func(f *Flags) *string { return &f.CNICacheDir },
		value:     value[string]{at: func(c *Config) *string { return &c.CNICacheDir }, render: plain}},
	{key: "podCIDR", file: "podCIDR",
		flag: FlagPodCIDR, help: "range of the built-in default pod network (podCIDR; default " + DefaultPodCIDR + ")",
		flagValue: func(f *Flags) *string { return &f.PodCIDR },
		value: value[string]{at: func(c *Config) *string { return &c.PodCIDR }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return kc.PodCIDR })},
		fill: func(c *Config, _ *kubeletConfiguration, _ bool) {
			if c.PodCIDR == "" {
				c.PodCIDR = DefaultPodCIDR
			}
		}},
	{key: "podNetworkBridge", flag: FlagPodNetworkBridge, help: "bridge of the built-in default pod network (default " + DefaultPodNetworkBridge + ")",
		flagValue: func(f *Flags) *string { return &f.PodNetworkBridge },
		value:     value[string]{at: func(c *Config) *string { return &c.PodNetworkBridge }, render: plain, def: constant(DefaultPodNetworkBridge)}},
	{key: "resolvConf", file: "resolvConf",
		value: value[string]{at: func(c *Config) *string { return &c.ResolvConf }, render: plain,
			kubelet: kubelet(func(kc *kubeletConfiguration) string { return *kc.ResolverConfig })}},

	{key: "evictionHard", file: "evictionHard", reload: ReloadEviction,
		value: value[map[string]string]{at: func(c *Config) *map[string]string { return &c.EvictionHard }, render: kv,
			kubelet: kubelet(func(kc *kubeletConfiguration) map[string]string { return kc.EvictionHard })},
		// The kubelet fills evictionHard in after defaulting (cmd/kubelet/app/server.go).
		fill: func(c *Config, kc *kubeletConfiguration, _ bool) {
			if c.EvictionHard == nil {
				c.EvictionHard = defaultEvictionHard()
			} else if *kc.MergeDefaultEvictionSettings {
				for k, v := range defaultEvictionHard() {
					if _, ok := c.EvictionHard[k]; !ok {
						c.EvictionHard[k] = v
					}
				}
			}
		},
		// The four maps are parsed together; an error names its own field.
		check: func(c *Config, p *problems) {
			if _, err := c.EvictionThresholds(); err != nil {
				p.errs = append(p.errs, err)
			}
		}},
	{key: "evictionSoft", file: "evictionSoft", reload: ReloadEviction,
		value: value[map[string]string]{at: func(c *Config) *map[string]string { return &c.EvictionSoft }, render: kv,
			kubelet: kubelet(func(kc *kubeletConfiguration) map[string]string { return kc.EvictionSoft })}},
	{key: "evictionSoftGracePeriod", file: "evictionSoftGracePeriod", reload: ReloadEviction,
		value: value[map[string]string]{at: func(c *Config) *map[string]string { return &c.EvictionSoftGracePeriod }, render: kv,
			kubelet: kubelet(func(kc *kubeletConfiguration) map[string]string { return kc.EvictionSoftGracePeriod })}},
	{key: "evictionMinimumReclaim", file: "evictionMinimumReclaim", reload: ReloadEviction,
		value: value[map[string]string]{at: func(c *Config) *map[string]string { return &c.EvictionMinimumReclaim }, render: kv,
			kubelet: kubelet(func(kc *kubeletConfiguration) map[string]string { return kc.EvictionMinimumReclaim })}},
	{key: "evictionPressureTransitionPeriod", file: "evictionPressureTransitionPeriod", reload: ReloadEviction,
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.EvictionPressureTransitionPeriod }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration { return kc.EvictionPressureTransitionPeriod.Duration })},
		check: notNegative(func(c *Config) time.Duration { return c.EvictionPressureTransitionPeriod })},
	{key: "evictionMaxPodGracePeriod", file: "evictionMaxPodGracePeriod", reload: ReloadEviction,
		value: value[int32]{at: func(c *Config) *int32 { return &c.EvictionMaxPodGracePeriod }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return kc.EvictionMaxPodGracePeriod })},
		check: func(c *Config, p *problems) {
			if c.EvictionMaxPodGracePeriod < 0 {
				p.bad("%d is negative", c.EvictionMaxPodGracePeriod)
			}
		}},
	{key: "failSwapOn", file: "failSwapOn",
		value: value[bool]{at: func(c *Config) *bool { return &c.FailSwapOn }, render: sprint[bool],
			kubelet: kubelet(func(kc *kubeletConfiguration) bool { return *kc.FailSwapOn })}},

	{key: "serializeImagePulls", file: "serializeImagePulls",
		value: value[bool]{at: func(c *Config) *bool { return &c.SerializeImagePulls }, render: sprint[bool],
			kubelet: kubelet(func(kc *kubeletConfiguration) bool { return *kc.SerializeImagePulls })}},
	{key: "maxParallelImagePulls", file: "maxParallelImagePulls",
		value: value[int32]{at: func(c *Config) *int32 { return &c.MaxParallelImagePulls }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return maxParallel(kc.MaxParallelImagePulls) })}},
	{key: "registryConfigDir", flag: FlagRegistryConfigDir, help: "registry mirrors, CAs and client certificates in containerd's layout, <dir>/<host>/hosts.toml (default " + DefaultRegistryConfigDir + ")",
		flagValue: func(f *Flags) *string { return &f.RegistryConfigDir },
		value:     value[string]{at: func(c *Config) *string { return &c.RegistryConfigDir }, render: plain, def: constant(DefaultRegistryConfigDir)}},
	{key: "imagePullProgressTimeout", flag: FlagImagePullProgressTimeout, help: "an image pull fails when a registry's response (manifest, config, layer) brings less than 1 KiB/s over this much waiting (default " + DefaultImagePullProgressTimeout.String() + ")",
		flagValue: func(f *Flags) *string { return &f.ImagePullProgressTimeout },
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.ImagePullProgressTimeout }, render: duration,
			def: constant(DefaultImagePullProgressTimeout)},
		parseFlag: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("--%s %q: want a positive duration (30s, 2m)", FlagImagePullProgressTimeout, v)
			}
			c.ImagePullProgressTimeout = d
			return nil
		}},
	// Not a KubeletConfiguration field: the file is the kubelet's, decoded
	// strictly, and the kubelet has no image policy (its runtime has).
	{key: "imagePolicyFile", flag: FlagImagePolicy, env: EnvImagePolicy,
		help:      "containers-policy.json(5) file every image must meet to enter the image store: pulls, imports, the import folder, bundles (default $" + EnvImagePolicy + "; none: every image is accepted)",
		flagValue: func(f *Flags) *string { return &f.ImagePolicy },
		value:     value[string]{at: func(c *Config) *string { return &c.ImagePolicyFile }, render: plain},
		// A flag is relative to the working directory, which differs between
		// the daemon (/ under systemd) and the CLI: kept absolute.
		parseFlag: func(c *Config, v string) error {
			if v == "" {
				c.ImagePolicyFile = ""
				return nil
			}
			abs, err := filepath.Abs(v)
			if err != nil {
				return fmt.Errorf("--%s %q: %w", FlagImagePolicy, v, err)
			}
			c.ImagePolicyFile = abs
			return nil
		},
		check: func(c *Config, p *problems) {
			if c.ImagePolicyFile != "" && !filepath.IsAbs(c.ImagePolicyFile) {
				p.bad("%q is not an absolute path", c.ImagePolicyFile)
			}
		}},
	{key: "imageGCHighThresholdPercent", file: "imageGCHighThresholdPercent", reload: ReloadImageGC,
		value: value[int32]{at: func(c *Config) *int32 { return &c.ImageGCHighThresholdPercent }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return *kc.ImageGCHighThresholdPercent })},
		check: percent(func(c *Config) int32 { return c.ImageGCHighThresholdPercent })},
	{key: "imageGCLowThresholdPercent", file: "imageGCLowThresholdPercent", reload: ReloadImageGC,
		value: value[int32]{at: func(c *Config) *int32 { return &c.ImageGCLowThresholdPercent }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return *kc.ImageGCLowThresholdPercent })},
		check: func(c *Config, p *problems) {
			percent(func(c *Config) int32 { return c.ImageGCLowThresholdPercent })(c, p)
			if c.ImageGCLowThresholdPercent > c.ImageGCHighThresholdPercent {
				p.bad("%d is above imageGCHighThresholdPercent %d", c.ImageGCLowThresholdPercent, c.ImageGCHighThresholdPercent)
			}
		}},
	{key: "imageMinimumGCAge", file: "imageMinimumGCAge", reload: ReloadImageGC,
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.ImageMinimumGCAge }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration { return kc.ImageMinimumGCAge.Duration })},
		check: notNegative(func(c *Config) time.Duration { return c.ImageMinimumGCAge })},
	{key: "imageMaximumGCAge", file: "imageMaximumGCAge", reload: ReloadImageGC,
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.ImageMaximumGCAge }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration { return kc.ImageMaximumGCAge.Duration })},
		// ValidateKubeletConfiguration
		check: func(c *Config, p *problems) {
			if c.ImageMaximumGCAge < 0 {
				p.bad("%v must not be negative", c.ImageMaximumGCAge)
			}
			if c.ImageMaximumGCAge > 0 && c.ImageMaximumGCAge <= c.ImageMinimumGCAge {
				p.bad("%v must be greater than imageMinimumGCAge %v", c.ImageMaximumGCAge, c.ImageMinimumGCAge)
			}
		}},
	{key: "seccompDefault", file: "seccompDefault",
		value: value[bool]{at: func(c *Config) *bool { return &c.SeccompDefault }, render: sprint[bool],
			kubelet: kubelet(func(kc *kubeletConfiguration) bool { return *kc.SeccompDefault })}},
	{key: "allowedUnsafeSysctls", file: "allowedUnsafeSysctls",
		value: value[[]string]{at: func(c *Config) *[]string { return &c.AllowedUnsafeSysctls }, render: commas,
			kubelet: kubelet(func(kc *kubeletConfiguration) []string { return kc.AllowedUnsafeSysctls })},
		check: func(c *Config, p *problems) {
			for _, s := range c.AllowedUnsafeSysctls {
				// The kubelet's sysctl.NewAllowlist.
				if ns, name, _ := utilsysctl.GetNamespace(s); ns == utilsysctl.UnknownNamespace {
					p.bad("the sysctls %q are not known to be namespaced", name)
				}
			}
		}},
	{key: "maxPods", file: "maxPods",
		value: value[int32]{at: func(c *Config) *int32 { return &c.MaxPods }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return kc.MaxPods })},
		check: func(c *Config, p *problems) {
			if c.MaxPods < 0 {
				p.bad("%d is negative", c.MaxPods)
			}
		}},
	{key: "podPidsLimit", file: "podPidsLimit",
		value: value[int64]{at: func(c *Config) *int64 { return &c.PodPidsLimit }, render: sprint[int64],
			kubelet: kubelet(func(kc *kubeletConfiguration) int64 { return *kc.PodPidsLimit })}},
	{key: "crashLoopBackOff.maxContainerRestartPeriod", file: "crashLoopBackOff.maxContainerRestartPeriod",
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.MaxContainerRestartPeriod }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration {
				return kc.CrashLoopBackOff.MaxContainerRestartPeriod.Duration
			})},
		check: notNegative(func(c *Config) time.Duration { return c.MaxContainerRestartPeriod })},

	{key: "rotateCertificates", file: "rotateCertificates",
		value: value[bool]{at: func(c *Config) *bool { return &c.RotateCertificates }, render: sprint[bool],
			kubelet: kubelet(func(kc *kubeletConfiguration) bool { return kc.RotateCertificates })}},
	{key: "registerSchedulable", flag: FlagRegisterSchedulable, help: "register the Node schedulable and leave it so (the kubelet's removed --register-schedulable); default false: unschedulable, as a node that runs static pods only",
		flagValue: func(f *Flags) *string { return &f.RegisterSchedulable },
		value:     value[bool]{at: func(c *Config) *bool { return &c.RegisterSchedulable }, render: sprint[bool]},
		parseFlag: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("--%s %q: want true or false", FlagRegisterSchedulable, v)
			}
			c.RegisterSchedulable = b
			return nil
		}},
	{key: "registerNode", file: "registerNode",
		value: value[bool]{at: func(c *Config) *bool { return &c.RegisterNode }, render: sprint[bool],
			kubelet: kubelet(func(kc *kubeletConfiguration) bool { return *kc.RegisterNode })}},
	{key: "registerWithTaints", file: "registerWithTaints",
		value: value[[]v1.Taint]{at: func(c *Config) *[]v1.Taint { return &c.RegisterWithTaints }, render: taints,
			kubelet: kubelet(func(kc *kubeletConfiguration) []v1.Taint { return kc.RegisterWithTaints })}},
	{key: "nodeStatusUpdateFrequency", file: "nodeStatusUpdateFrequency",
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.NodeStatusUpdateFrequency }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration { return kc.NodeStatusUpdateFrequency.Duration })},
		check: notNegative(func(c *Config) time.Duration { return c.NodeStatusUpdateFrequency })},
	{key: "nodeStatusReportFrequency", file: "nodeStatusReportFrequency",
		value: value[time.Duration]{at: func(c *Config) *time.Duration { return &c.NodeStatusReportFrequency }, render: duration,
			kubelet: kubelet(func(kc *kubeletConfiguration) time.Duration { return kc.NodeStatusReportFrequency.Duration })},
		check: notNegative(func(c *Config) time.Duration { return c.NodeStatusReportFrequency })},
	{key: "nodeLeaseDurationSeconds", file: "nodeLeaseDurationSeconds",
		value: value[int32]{at: func(c *Config) *int32 { return &c.NodeLeaseDurationSeconds }, render: sprint[int32],
			kubelet: kubelet(func(kc *kubeletConfiguration) int32 { return kc.NodeLeaseDurationSeconds })},
		check: func(c *Config, p *problems) {
			if c.NodeLeaseDurationSeconds <= 0 {
				p.bad("%d is not positive", c.NodeLeaseDurationSeconds)
			}
		}},
}

// LiveFields are the keys of the fields a reload applies live through
// group, in table order.
func LiveFields(group Reload) []string {
	var keys []string
	for _, f := range fields {
		if f.reload == group && group != Restart {
			keys = append(keys, f.key)
		}
	}
	return keys
}

// LiveGroups are the groups a reload applies live, each by the part of the
// daemon that owns it: those of the table's fields, in the order of Reload.
func LiveGroups() []Reload {
	var groups []Reload
	for _, f := range fields {
		if f.reload != Restart && !slices.Contains(groups, f.reload) {
			groups = append(groups, f.reload)
		}
	}
	slices.Sort(groups)
	return groups
}

// ChangedIn says whether a field of group shows a different value in new
// than in old, as Changed compares them.
func ChangedIn(old, new *Config, group Reload) bool {
	for _, f := range fields {
		if f.reload == group && f.value.show(old) != f.value.show(new) {
			return true
		}
	}
	return false
}

// ReloadOf says how a running daemon takes a change of key; Restart for a
// key that is not one of Config's.
func ReloadOf(key string) Reload {
	for _, f := range fields {
		if f.key == key {
			return f.reload
		}
	}
	return Restart
}

// CopyLive sets every live field of dst, and its origin, from src: what
// runs after a reload is src's value of each live field and dst's of the
// others, which need a restart.
func CopyLive(dst, src *Config) {
	for _, f := range fields {
		if f.reload == Restart {
			continue
		}
		f.value.copy(dst, src)
		if o, ok := src.Origins[f.key]; ok {
			dst.Origins[f.key] = o
		} else {
			delete(dst.Origins, f.key)
		}
	}
}

// Changed lists, sorted, the keys whose shown value differs between old and
// new.
func Changed(old, new *Config) []string {
	var out []string
	for _, f := range fields {
		if f.value.show(old) != f.value.show(new) {
			out = append(out, f.key)
		}
	}
	sort.Strings(out)
	return out
}
