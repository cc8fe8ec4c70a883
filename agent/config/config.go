// Package config loads staticpodd's configuration: a KubeletConfiguration file
// (kubelet.config.k8s.io/v1beta1) with the kubelet's defaults, overridden by flags,
// and remembers where every value came from. Every value is declared once, in
// the table of fields.go, which drives loading, defaults, flags, validation,
// display and what a reload applies (docs/architecture.md, "Configuration").
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/staticpodd/staticpodd/sysd"
)

// systemdBooted says whether systemd is init, which an unset cgroupDriver
// follows; the tests set both answers.
var systemdBooted = sysd.Booted

// The only apiVersion and kind a config file may have.
const (
	APIVersion = "kubelet.config.k8s.io/v1beta1"
	Kind       = "KubeletConfiguration"
)

// Origins of a value.
const (
	OriginDefault = "default"
	originFile    = "file "
	originFlag    = "flag --"
	originEnv     = "env "
	// originReadOnlyAddress: address is the kubelet's default, for the node
	// API, and the read-only port listens on DefaultReadOnlyAddress.
	originReadOnlyAddress = OriginDefault + " (the read-only port on loopback)"
	originCertDir         = OriginDefault + " (<rootDir>/pki)"
)

// Config is the effective configuration staticpodd runs with. Field comments name
// the KubeletConfiguration field or flag each comes from.
type Config struct {
	ConfigFile string // --config; "" when none
	// MissingConfig is the kubelet personality's --config file when it is
	// not there yet (kubeadm init or join writes it): the daemon serves the
	// CRI only (serveCRIOnly). "" otherwise.
	MissingConfig string

	NodeName string // --hostname-override, else the hostname; lower-cased
	NodeIP   string // --node-ip
	// NodeLabels are --node-labels: the Node's labels when staticpodd
	// registers it, over the default ones, as the kubelet sets them.
	NodeLabels map[string]string
	// RegisterSchedulable (--register-schedulable) registers the Node
	// schedulable and leaves it so; by default it is unschedulable.
	RegisterSchedulable bool
	Kubeconfig          string // --kubeconfig; "" = no mirror pods
	// ContainerRuntimeEndpoint and ImageServiceEndpoint are the kubelet's
	// containerRuntimeEndpoint and imageServiceEndpoint: staticpodd is the
	// runtime, so they may only name its own CRI socket (CRISocket); by
	// default they do ("" for the image service: the same).
	ContainerRuntimeEndpoint string
	ImageServiceEndpoint     string
	// BootstrapKubeconfig (--bootstrap-kubeconfig) holds the credentials
	// that request the node's client certificate when Kubeconfig has none
	// valid; the certificate is kept in CertDir (--cert-dir, default
	// <RootDir>/pki, the kubelet personality's /var/lib/kubelet/pki), with
	// the node API's self-signed serving certificate, and renewed before it
	// expires with RotateCertificates (rotateCertificates), as the kubelet
	// does.
	BootstrapKubeconfig string
	CertDir             string
	RotateCertificates  bool
	RootDir             string // --root-dir
	RunDir              string // --run-dir

	StaticPodPath      string      // staticPodPath, --pod-manifest-path
	StaticPodURL       string      // staticPodURL, --manifest-url
	StaticPodURLHeader http.Header // staticPodURLHeader, --manifest-url-header; keys as written
	StaticPodURLCA     string      // --manifest-url-ca: trusted besides the system roots; no file field
	FileCheckFrequency time.Duration
	HTTPCheckFrequency time.Duration
	SyncFrequency      time.Duration

	Address      string
	Port         int32
	ReadOnlyPort int32 // 0 = disabled
	// HealthzPort and HealthzBindAddress are the kubelet's healthz port:
	// GET /healthz, the ping check only; 0 = off.
	HealthzPort        int32
	HealthzBindAddress string
	TLSCertFile        string
	TLSPrivateKeyFile  string
	ClientCAFile       string // authentication.x509.clientCAFile
	// TLSMinVersion and TLSCipherSuites are tlsMinVersion and
	// tlsCipherSuites, as Go names them (VersionTLS12, TLS_AES_128_GCM_SHA256).
	TLSMinVersion   string
	TLSCipherSuites []string
	// AnonymousAuth is authentication.anonymous.enabled.
	AnonymousAuth bool
	// WebhookAuthn is authentication.webhook.enabled: bearer tokens are
	// checked with a TokenReview (with a kubeconfig), and the answer kept
	// WebhookAuthnCacheTTL (authentication.webhook.cacheTTL).
	WebhookAuthn         bool
	WebhookAuthnCacheTTL time.Duration
	// AuthorizationMode is authorization.mode: AlwaysAllow or Webhook
	// (a SubjectAccessReview, its answer kept the authorized or
	// unauthorized TTL).
	AuthorizationMode      string
	AuthzCacheAuthorized   time.Duration
	AuthzCacheUnauthorized time.Duration

	PodLogsDir           string
	ContainerLogMaxSize  int64 // bytes
	ContainerLogMaxFiles int32

	CgroupRoot   string
	CgroupDriver string // "cgroupfs" or "systemd"

	// CredentialsDirectory is where the values of Secrets' credentials
	// are read (staticpodd.io/credentials): --credentials-directory, else
	// $CREDENTIALS_DIRECTORY, which systemd sets for a unit with
	// credentials; "" = none.
	CredentialsDirectory string

	// The pod network (pods without hostNetwork), through CNI.
	CNIConfDir  string   // --cni-conf-dir
	CNIBinDirs  []string // --cni-bin-dir, comma-separated
	CNICacheDir string   // --cni-cache-dir; "" = <run-dir>/cni/cache
	// PodCIDR is the built-in default network's range (podCIDR, --pod-cidr,
	// the kubelet's range for a standalone node); "" = oci's default.
	PodCIDR          string
	PodNetworkBridge string // --pod-network-bridge
	// ResolvConf is the resolver file pods' resolv.conf is made from
	// (resolvConf); "" gives them a local resolver, as the kubelet.
	ResolvConf string

	EvictionHard                     map[string]string
	EvictionSoft                     map[string]string
	EvictionSoftGracePeriod          map[string]string
	EvictionMinimumReclaim           map[string]string
	EvictionPressureTransitionPeriod time.Duration
	// EvictionMaxPodGracePeriod caps, in seconds, the grace period of a pod
	// evicted by a soft threshold (evictionMaxPodGracePeriod); 0 = the pod's.
	EvictionMaxPodGracePeriod int32
	// FailSwapOn: the daemon refuses to start when swap is on (failSwapOn).
	FailSwapOn bool

	SerializeImagePulls bool
	// MaxParallelImagePulls bounds the pulls at once when SerializeImagePulls
	// is false; 0 = no bound (the kubelet's nil).
	MaxParallelImagePulls int32
	// RegistryConfigDir holds containerd's hosts.toml layout (--registry-config-dir).
	RegistryConfigDir string
	// ImagePolicyFile is the containers-policy.json(5) every image entering
	// the store must meet (--image-policy, else $STATICPODD_IMAGE_POLICY);
	// "" accepts every image.
	ImagePolicyFile string
	// ImagePullProgressTimeout is the progress deadline of a registry's
	// response body (--image-pull-progress-timeout).
	ImagePullProgressTimeout    time.Duration
	ImageGCHighThresholdPercent int32
	ImageGCLowThresholdPercent  int32
	ImageMinimumGCAge           time.Duration
	ImageMaximumGCAge           time.Duration // 0: no maximum
	SeccompDefault              bool
	// AllowedUnsafeSysctls are the sysctls (names, or prefixes ending in
	// '*') a pod may set beyond the kubelet's safe ones.
	AllowedUnsafeSysctls []string
	MaxPods              int32
	// PodPidsLimit is podPidsLimit: the most processes a pod may have; -1 =
	// no limit (the kubelet's default).
	PodPidsLimit int64
	// MaxContainerRestartPeriod is crashLoopBackOff.maxContainerRestartPeriod.
	MaxContainerRestartPeriod time.Duration

	// With a kubeconfig: the Node, its status and its Lease.
	RegisterNode              bool       // registerNode
	RegisterWithTaints        []v1.Taint // registerWithTaints
	NodeStatusUpdateFrequency time.Duration
	NodeStatusReportFrequency time.Duration
	NodeLeaseDurationSeconds  int32

	// Origins maps each Entry key to where its value came from: "default",
	// "file <path>" or "flag --<name>".
	Origins map[string]string
	// kubelet is the file's KubeletConfiguration with the kubelet's
	// defaults, which Kubelet (/configz) shows with the effective values
	// over it.
	kubelet *kubeletConfiguration
}

// Entry is one effective value, for display.
type Entry struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Origin string `json:"origin"`
}

// Load reads the config file at path ("" for none), applies the kubelet's
// defaults, then the flags that were given. It returns one warning per known
// kubelet field the file sets to a non-default value that staticpodd ignores; the
// caller logs them. An unknown field, a wrong apiVersion or kind, or an invalid
// value is an error.
func Load(path string, flags Flags) (*Config, []string, error) {
	if v, ok := flags.given(FlagConfig); ok && path == "" {
		path = v
	}
	kc := kubeletConfiguration{}
	raw := map[string]any{}
	missing := ""
	if path != "" {
		// Like the kubelet, name the file by its absolute path.
		var err error
		if path, err = filepath.Abs(path); err != nil {
			return nil, nil, fmt.Errorf("config %s: %w", path, err)
		}
		if flags.kubelet {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				missing, path = path, ""
			}
		}
	}
	if path != "" {
		var err error
		if raw, err = decodeFile(path, &kc); err != nil {
			return nil, nil, err
		}
	}
	if len(flags.overlay) > 0 {
		// The kubelet's flags of file fields win over the file; the merged
		// document is decoded again.
		var err error
		if raw, err = overlay(raw, flags.overlay, &kc); err != nil {
			return nil, nil, fmt.Errorf("config %s: %w", describe(path), err)
		}
	}
	if path != "" {
		// The flags' paths are absolute already (kindPath).
		resolveRelativePaths(&kc, filepath.Dir(path))
	}
	setDefaults(&kc)
	warnings, err := ignoredWarnings(path, raw, &kc, flags.overlay)
	if err != nil {
		return nil, nil, err
	}
	c, err := fromKubelet(path, raw, &kc, flags.overlay)
	if err != nil {
		return nil, nil, err
	}
	c.kubelet = &kc
	if err := c.applyFlags(&flags); err != nil {
		return nil, nil, err
	}
	if c.CertDir == "" || c.Origins["certDir"] == OriginDefault {
		c.CertDir = filepath.Join(c.RootDir, "pki")
		c.Origins["certDir"] = originCertDir
		if flags.kubelet {
			c.CertDir = DefaultKubeletCertDir
			c.Origins["certDir"] = OriginDefault + " (kubelet)"
		}
	}
	if c.ReadOnlyPort != 0 && c.Origins["address"] == OriginDefault {
		c.Origins["address"] = originReadOnlyAddress
	}
	// Defaults that depend on other values, which flags may have set.
	if c.ContainerRuntimeEndpoint == "" {
		c.ContainerRuntimeEndpoint = "unix://" + c.CRISocket()
	}
	if missing != "" {
		c.serveCRIOnly(missing)
	}
	if err := c.validate(); err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", describe(path), err)
	}
	return c, warnings, nil
}

// serveCRIOnly is the kubelet personality whose --config file is not there
// yet: kubeadm calls the CRI (preflight: the runtime's status, its images)
// before it writes /var/lib/kubelet/config.yaml and restarts the kubelet,
// and staticpodd is that CRI. Where the kubelet fails (and systemd restarts
// it), the daemon serves the CRI and nothing that needs the configuration:
// no manifest source, no API server, no node API, healthz or read-only port.
// The pods found running are kept as they are (the daemon waits for the
// manifest source the configuration will name before it removes any).
func (c *Config) serveCRIOnly(missing string) {
	c.MissingConfig = missing
	why := "off: --config " + missing + " is not there yet"
	c.StaticPodPath, c.Origins["staticPodPath"] = "", why
	c.StaticPodURL, c.Origins["staticPodURL"] = "", why
	c.Kubeconfig, c.Origins["kubeconfig"] = "", why
	c.BootstrapKubeconfig, c.Origins["bootstrapKubeconfig"] = "", why
	c.HealthzPort, c.Origins["healthzPort"] = 0, why
	c.ReadOnlyPort, c.Origins["readOnlyPort"] = 0, why
}

// resolveRelativePaths makes the file's relative paths relative to the file's
// directory, as the kubelet does for the fields in KubeletConfigurationPathRefs.
// Flags are relative to the working directory, as everywhere.
func resolveRelativePaths(kc *kubeletConfiguration, dir string) {
	paths := []*string{&kc.StaticPodPath, &kc.Authentication.X509.ClientCAFile,
		&kc.TLSCertFile, &kc.TLSPrivateKeyFile, &kc.VolumePluginDir, &kc.PodLogsDir}
	if kc.ResolverConfig != nil {
		paths = append(paths, kc.ResolverConfig)
	}
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

func describe(path string) string {
	if path == "" {
		return "(defaults and flags)"
	}
	return path
}

// decodeFile reads a KubeletConfiguration into kc and returns the document as
// generic JSON, to tell which fields the file sets.
func decodeFile(path string, kc *kubeletConfiguration) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	raw := map[string]any{}
	if err := json.Unmarshal(js, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("config %s: not a KubeletConfiguration object", path)
	}
	if raw["apiVersion"] != APIVersion || raw["kind"] != Kind {
		return nil, fmt.Errorf("config %s: apiVersion %v, kind %v: want apiVersion %s, kind %s",
			path, raw["apiVersion"], raw["kind"], APIVersion, Kind)
	}
	if _, ok := raw["imagePolicyFile"]; ok {
		// The name staticpodd gives the value, but the file is the
		// kubelet's: say where it goes instead of "unknown field".
		return nil, fmt.Errorf("config %s: imagePolicyFile is not a KubeletConfiguration field: give it with --%s or $%s", path, FlagImagePolicy, EnvImagePolicy)
	}
	if err := decodeStrict(js, kc, "config "+path+": "); err != nil {
		return nil, err
	}
	return raw, nil
}

// decodeStrict decodes a KubeletConfiguration, refusing unknown and
// duplicate fields; prefix starts every error.
func decodeStrict(js []byte, kc *kubeletConfiguration, prefix string) error {
	strict, err := sigsjson.UnmarshalStrict(js, kc, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return fmt.Errorf("%s%w", prefix, err)
	}
	errs := make([]error, 0, len(strict))
	for _, e := range strict {
		errs = append(errs, fmt.Errorf("%s%w", prefix, e))
	}
	return errors.Join(errs...)
}

// overlay sets each override's field in the file's document raw (nil or
// empty: no file), and decodes the result into kc.
func overlay(raw map[string]any, overrides []override, kc *kubeletConfiguration) (map[string]any, error) {
	merged := map[string]any{"apiVersion": APIVersion, "kind": Kind}
	for k, v := range raw {
		merged[k] = v
	}
	for _, o := range overrides {
		cur := merged
		parts := strings.Split(o.field, ".")
		for _, part := range parts[:len(parts)-1] {
			// A copy of each level: raw stays the file's.
			next := map[string]any{}
			if m, ok := cur[part].(map[string]any); ok {
				maps.Copy(next, m)
			}
			cur[part] = next
			cur = next
		}
		cur[parts[len(parts)-1]] = o.value
	}
	js, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	// Back to generic JSON, as a file's document is: numbers as float64.
	out := map[string]any{}
	if err := json.Unmarshal(js, &out); err != nil {
		return nil, err
	}
	*kc = kubeletConfiguration{}
	if err := decodeStrict(js, kc, ""); err != nil {
		return nil, err
	}
	return out, nil
}

// honoured are the KubeletConfiguration fields staticpodd gives their kubelet
// meaning (docs/configuration.md, "Fields"), as dotted JSON paths: those of
// the table, fields, and the few that only say how the file is read.
var honoured = func() map[string]bool {
	h := map[string]bool{
		"apiVersion": true, "kind": true,
		// mergeDefaultEvictionSettings only changes how evictionHard is filled in.
		"mergeDefaultEvictionSettings": true,
	}
	for _, f := range fields {
		if f.file != "" {
			h[f.file] = true
		}
	}
	return h
}()

// ignoredWarnings returns one warning per field the file sets, that staticpodd
// does not honour, and whose value differs from the kubelet's default.
func ignoredWarnings(path string, raw map[string]any, kc *kubeletConfiguration, overrides []override) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	eff, err := toMap(kc)
	if err != nil {
		return nil, err
	}
	def := kubeletConfiguration{}
	setDefaults(&def)
	dm, err := toMap(&def)
	if err != nil {
		return nil, err
	}
	var warnings []string
	walkIgnored("", raw, eff, dm, func(field string) {
		for _, o := range overrides {
			if o.field == field {
				warnings = append(warnings, fmt.Sprintf("--%s (%s) is set but staticpodd ignores it", o.flag, field))
				return
			}
		}
		warnings = append(warnings, fmt.Sprintf("config %s: %s is set but staticpodd ignores it", path, field))
	})
	sort.Strings(warnings)
	return warnings, nil
}

func walkIgnored(prefix string, raw, eff, def map[string]any, warn func(string)) {
	for key, rv := range raw {
		field := prefix + key
		if honoured[field] {
			continue
		}
		// Name the leaf inside nested objects (authentication.webhook.enabled),
		// but a map-valued field (systemReserved) as a whole.
		sub, isMap := rv.(map[string]any)
		dm, defIsMap := def[key].(map[string]any)
		if isMap && (defIsMap || hasHonouredBelow(field)) {
			em, _ := eff[key].(map[string]any)
			walkIgnored(field+".", sub, em, dm, warn)
			continue
		}
		if !reflect.DeepEqual(eff[key], def[key]) {
			warn(field)
		}
	}
}

func hasHonouredBelow(field string) bool {
	for h := range honoured {
		if strings.HasPrefix(h, field+".") {
			return true
		}
	}
	return false
}

func toMap(v any) (map[string]any, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode KubeletConfiguration: %w", err)
	}
	m := map[string]any{}
	d := json.NewDecoder(bytes.NewReader(js))
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode KubeletConfiguration: %w", err)
	}
	return m, nil
}

// inFile reports whether the file sets the dotted field.
func inFile(raw map[string]any, field string) bool {
	var cur any = raw
	for _, part := range strings.Split(field, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

// fromKubelet is the configuration the defaulted file gives, with
// staticpodd's defaults for the rest.
func fromKubelet(path string, raw map[string]any, kc *kubeletConfiguration, overrides []override) (*Config, error) {
	c := &Config{Origins: map[string]string{}}
	for _, f := range fields {
		if err := f.value.fromFile(c, kc); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		set := f.file != "" && inFile(raw, f.file)
		c.Origins[f.key] = OriginDefault
		if set {
			c.Origins[f.key] = originFile + path
		}
		if f.fill != nil {
			f.fill(c, kc, set)
		}
		for _, o := range overrides {
			if o.field == f.file {
				c.Origins[f.key] = originFlag + o.flag
			}
		}
	}
	c.ConfigFile = path
	if path != "" {
		c.Origins["configFile"] = originFlag + FlagConfig
	}
	return c, nil
}

// applyFlags sets the values of the flags that were given, then those of
// the environment variables whose flag was not.
func (c *Config) applyFlags(fl *Flags) error {
	for _, f := range fields {
		var err error
		switch {
		case f.byLoad:
			continue
		case f.flagList != nil:
			vs := *f.flagList(fl)
			if len(vs) == 0 {
				continue
			}
			err = f.parseList(c, vs)
		case f.flagValue != nil:
			v, ok := fl.given(f.flag)
			if !ok {
				continue
			}
			if f.parseFlag != nil {
				err = f.parseFlag(c, v)
			} else if !f.value.setString(c, v) {
				panic("config: flag --" + f.flag + " of a non-string value has no parseFlag")
			}
		default:
			continue
		}
		if err != nil {
			return err
		}
		c.Origins[f.key] = originFlag + f.flag
	}
	for _, f := range fields {
		if v := os.Getenv(f.env); f.env != "" && v != "" && c.Origins[f.key] == OriginDefault {
			f.value.setString(c, v)
			c.Origins[f.key] = originEnv + f.env
		}
	}
	if c.NodeName != "" { // --hostname-override
		return nil
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("node name: %w", err)
	}
	c.NodeName = strings.ToLower(strings.TrimSpace(host))
	c.Origins["nodeName"] = OriginDefault + " (hostname)"
	return nil
}

// Origin returns where the value shown under key came from.
func (c *Config) Origin(key string) string {
	return c.Origins[key]
}

// Entries returns every effective value with its origin, in a stable order.
func (c *Config) Entries() []Entry {
	out := make([]Entry, 0, len(fields))
	for _, f := range fields {
		out = append(out, Entry{Key: f.key, Value: f.value.show(c), Origin: c.Origins[f.key]})
	}
	return out
}

// maxParallel is maxParallelImagePulls, 0 when unset (no bound).
func maxParallel(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// ReadOnlyAddress is where the read-only port listens: address when one is
// given (file, flag), else loopback (DefaultReadOnlyAddress), while the
// node API, which authenticates every request, listens on address's
// default, all interfaces, as the kubelet's does.
func (c *Config) ReadOnlyAddress() string {
	if c.Origins["address"] == originReadOnlyAddress {
		return DefaultReadOnlyAddress
	}
	return c.Address
}
