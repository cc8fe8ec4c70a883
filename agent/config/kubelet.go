package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

// The kubelet personality: the binary invoked as kubelet (a symlink named
// kubelet, or `staticpodd kubelet`) takes the kubelet's command line, as
// kubeadm's kubelet.service drop-in gives it (--bootstrap-kubeconfig,
// --kubeconfig, --config, then KUBELET_KUBEADM_ARGS from
// /var/lib/kubelet/kubeadm-flags.env and KUBELET_EXTRA_ARGS), and maps it
// onto staticpodd's configuration (docs/configuration.md, "The kubelet
// personality").

// KubeletName is the name the binary answers to as the kubelet.
const KubeletName = "kubelet"

// DefaultKubeletCertDir is the kubelet's --cert-dir default.
const DefaultKubeletCertDir = "/var/lib/kubelet/pki"

// CRISocketName is the CRI socket's name in the run dir: staticpodd is the
// container runtime a kubelet's containerRuntimeEndpoint names.
const CRISocketName = "cri.sock"

// CRISocket is the path of the CRI socket.
func (c *Config) CRISocket() string { return filepath.Join(c.RunDir, CRISocketName) }

// flagKind says how a kubelet flag's value becomes its KubeletConfiguration
// field's JSON, as the kubelet's own flag type parses it.
type flagKind uint8

const (
	kindString   flagKind = iota
	kindPath              // a file or directory: relative to the working directory
	kindInt               // int32 or int64
	kindBool              // pflag's bool: --flag alone is true
	kindDuration          // time.ParseDuration
	kindList              // comma-separated (pflag's StringSlice)
	kindMap               // key=value,... (cliflag.MapStringString)
	kindMapLess           // signal<quantity,... (cliflag.LangleSeparatedMapStringString)
	kindMapBool           // Gate=true,... (the feature gates)
	kindTaints            // key[=value]:Effect,... (utiltaints)
)

// kubeletFileFlags are the kubelet's flags that set a KubeletConfiguration
// field, by the field's dotted JSON path. As in the kubelet, such a flag
// wins over the config file; a field staticpodd does not honour gets the
// same one warning the file would (config file rules).
var kubeletFileFlags = []struct {
	flag, field string
	kind        flagKind
}{
	{"address", "address", kindString},
	{"allowed-unsafe-sysctls", "allowedUnsafeSysctls", kindList},
	{"anonymous-auth", "authentication.anonymous.enabled", kindBool},
	{"authentication-token-webhook", "authentication.webhook.enabled", kindBool},
	{"authentication-token-webhook-cache-ttl", "authentication.webhook.cacheTTL", kindDuration},
	{"authorization-mode", "authorization.mode", kindString},
	{"authorization-webhook-cache-authorized-ttl", "authorization.webhook.cacheAuthorizedTTL", kindDuration},
	{"authorization-webhook-cache-unauthorized-ttl", "authorization.webhook.cacheUnauthorizedTTL", kindDuration},
	{"cgroup-driver", "cgroupDriver", kindString},
	{"cgroup-root", "cgroupRoot", kindString},
	{"cgroups-per-qos", "cgroupsPerQOS", kindBool},
	{"client-ca-file", "authentication.x509.clientCAFile", kindPath},
	{"cluster-dns", "clusterDNS", kindList},
	{"cluster-domain", "clusterDomain", kindString},
	{"container-log-max-files", "containerLogMaxFiles", kindInt},
	{"container-log-max-size", "containerLogMaxSize", kindString},
	{"container-runtime-endpoint", "containerRuntimeEndpoint", kindString},
	{"enforce-node-allocatable", "enforceNodeAllocatable", kindList},
	{"event-burst", "eventBurst", kindInt},
	{"event-qps", "eventRecordQPS", kindInt},
	{"eviction-hard", "evictionHard", kindMapLess},
	{"eviction-max-pod-grace-period", "evictionMaxPodGracePeriod", kindInt},
	{"eviction-minimum-reclaim", "evictionMinimumReclaim", kindMap},
	{"eviction-pressure-transition-period", "evictionPressureTransitionPeriod", kindDuration},
	{"eviction-soft", "evictionSoft", kindMapLess},
	{"eviction-soft-grace-period", "evictionSoftGracePeriod", kindMap},
	{"fail-swap-on", "failSwapOn", kindBool},
	{"feature-gates", "featureGates", kindMapBool},
	{"file-check-frequency", "fileCheckFrequency", kindDuration},
	{"hairpin-mode", "hairpinMode", kindString},
	{"healthz-bind-address", "healthzBindAddress", kindString},
	{"healthz-port", "healthzPort", kindInt},
	{"http-check-frequency", "httpCheckFrequency", kindDuration},
	{"image-gc-high-threshold", "imageGCHighThresholdPercent", kindInt},
	{"image-gc-low-threshold", "imageGCLowThresholdPercent", kindInt},
	{"image-service-endpoint", "imageServiceEndpoint", kindString},
	{"kube-api-burst", "kubeAPIBurst", kindInt},
	{"kube-api-qps", "kubeAPIQPS", kindInt},
	{"kube-reserved", "kubeReserved", kindMap},
	{"kubelet-cgroups", "kubeletCgroups", kindString},
	{"max-open-files", "maxOpenFiles", kindInt},
	{"max-pods", "maxPods", kindInt},
	{"minimum-image-ttl-duration", "imageMinimumGCAge", kindDuration},
	{"node-status-update-frequency", "nodeStatusUpdateFrequency", kindDuration},
	{"oom-score-adj", "oomScoreAdj", kindInt},
	{"pod-max-pids", "podPidsLimit", kindInt},
	{"pods-per-core", "podsPerCore", kindInt},
	{"port", "port", kindInt},
	{"protect-kernel-defaults", "protectKernelDefaults", kindBool},
	{"provider-id", "providerID", kindString},
	{"read-only-port", "readOnlyPort", kindInt},
	{"register-node", "registerNode", kindBool},
	{"register-with-taints", "registerWithTaints", kindTaints},
	{"registry-burst", "registryBurst", kindInt},
	{"registry-qps", "registryPullQPS", kindInt},
	{"reserved-cpus", "reservedSystemCPUs", kindString},
	{"resolv-conf", "resolvConf", kindPath},
	{"rotate-certificates", "rotateCertificates", kindBool},
	{"rotate-server-certificates", "serverTLSBootstrap", kindBool},
	{"runtime-request-timeout", "runtimeRequestTimeout", kindDuration},
	{"seccomp-default", "seccompDefault", kindBool},
	{"serialize-image-pulls", "serializeImagePulls", kindBool},
	{"streaming-connection-idle-timeout", "streamingConnectionIdleTimeout", kindDuration},
	{"sync-frequency", "syncFrequency", kindDuration},
	{"system-cgroups", "systemCgroups", kindString},
	{"system-reserved", "systemReserved", kindMap},
	{"tls-cert-file", "tlsCertFile", kindPath},
	{"tls-cipher-suites", "tlsCipherSuites", kindList},
	{"tls-min-version", "tlsMinVersion", kindString},
	{"tls-private-key-file", "tlsPrivateKeyFile", kindPath},
	{"volume-plugin-dir", "volumePluginDir", kindPath},
	{"volume-stats-agg-period", "volumeStatsAggPeriod", kindDuration},
}

// kubeletNotes are the kubelet's flags that set nothing in staticpodd,
// with why: each given one is logged once, as a warning. The kubelet
// itself only warns about these, or they name a part staticpodd does not
// have and never needs.
var kubeletNotes = map[string]string{
	"pod-infra-container-image": "staticpodd has no pause container: a pod's namespaces are held by its sandbox, not a container (the kubelet itself only uses this flag to keep the image from garbage collection)",
	"runtime-cgroups":           "staticpodd is the container runtime; it runs in the cgroup its service unit gives it",
	"lock-file":                 "staticpodd holds its own lock on <run-dir>/staticpodd.lock",
	"exit-on-lock-contention":   "staticpodd holds its own lock on <run-dir>/staticpodd.lock and exits when another daemon has it",
}

// kubeletRefused are the kubelet's flags staticpodd cannot honour and will
// not pretend to: given a value that asks for something (not "" or
// "false"), the start fails with why.
var kubeletRefused = map[string]string{
	"cloud-provider":                    "staticpodd has no cloud provider integration (a cloud controller manager would wait for a node.cloudprovider.kubernetes.io/uninitialized taint it never sets); leave it unset",
	"config-dir":                        "drop-in directories of KubeletConfiguration are not read; merge them into --config's file",
	"runonce":                           "use `staticpodd run --once`",
	"image-credential-provider-config":  noCredentialProviders,
	"image-credential-provider-bin-dir": noCredentialProviders,
}

const noCredentialProviders = "credential provider plugins are not run; staticpodd reads registry credentials from " +
	"containerd's hosts.toml layout (--registry-config-dir)"

// KubeletFlags are the kubelet's command line: staticpodd's own flags,
// whose names and meanings the kubelet shares (--config, --kubeconfig,
// --hostname-override, --node-ip, --pod-manifest-path, --root-dir, ...),
// the kubelet's flags of KubeletConfiguration fields, and the kubelet's
// others that kubeadm writes or its users commonly give.
type KubeletFlags struct {
	Flags
	// Version is --version: "false" or "true" (print `Kubernetes
	// <version>` as the kubelet does, which kubeadm's preflight reads).
	Version string
	// Verbosity is klog's --v.
	Verbosity int

	fs     *pflag.FlagSet
	values map[string]*string // kubeletFileFlags, kubeletNotes and kubeletRefused, by flag
	// repeated: the kubeletFileFlags of lists and maps, which add up when
	// given again, as the kubelet's StringSlice and MapStringString do.
	repeated map[string]*[]string
}

// Register adds the kubelet's flags to fs, staticpodd's own among them.
func (k *KubeletFlags) Register(fs *pflag.FlagSet) {
	k.fs = fs
	k.Flags.Register(fs)
	k.values, k.repeated = map[string]*string{}, map[string]*[]string{}
	str := func(name, help string) {
		k.values[name] = fs.String(name, "", help)
	}
	for _, f := range kubeletFileFlags {
		help := "the KubeletConfiguration's " + f.field + "; wins over --config's file"
		switch f.kind {
		case kindList, kindMap, kindMapLess, kindMapBool:
			k.repeated[f.flag] = fs.StringArray(f.flag, nil, help+"; repeatable")
		default:
			str(f.flag, help)
		}
		if f.kind == kindBool {
			fs.Lookup(f.flag).NoOptDefVal = "true"
		}
	}
	for name, why := range kubeletNotes {
		str(name, "accepted and ignored: "+why)
	}
	for name, why := range kubeletRefused {
		str(name, "not supported: "+why)
	}
	fs.Lookup("runonce").NoOptDefVal = "true" // a bool in the kubelet
	fs.StringVar(&k.Version, "version", "false", "print `Kubernetes <version>`, the kubelet's version staticpodd answers for, and exit")
	fs.Lookup("version").NoOptDefVal = "true"
	fs.IntVarP(&k.Verbosity, "v", "v", 0, "log verbosity, as klog's: 4 and above logs at debug level")
}

// Resolve checks the kubelet flags that were given and returns the Flags
// Load takes, with one warning for each flag that sets nothing.
func (k *KubeletFlags) Resolve() (Flags, []string, error) {
	f := k.Flags
	f.kubelet = true
	var warnings []string
	for _, name := range slices.Sorted(maps.Keys(kubeletRefused)) {
		if v := k.values[name]; k.fs.Changed(name) && *v != "" && *v != "false" {
			return Flags{}, nil, fmt.Errorf("--%s=%s: %s", name, *v, kubeletRefused[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(kubeletNotes)) {
		if k.fs.Changed(name) {
			warnings = append(warnings, fmt.Sprintf("--%s=%s is ignored: %s", name, *k.values[name], kubeletNotes[name]))
		}
	}
	for _, ff := range kubeletFileFlags {
		if !k.fs.Changed(ff.flag) {
			continue
		}
		given := k.fs.Lookup(ff.flag).Value.String()
		if vs, ok := k.repeated[ff.flag]; ok {
			// A later pair wins over an earlier one of the same key.
			given = strings.Join(*vs, ",")
		}
		v, err := ff.kind.parse(given)
		if err != nil {
			return Flags{}, nil, fmt.Errorf("invalid argument %q for --%s: %w", given, ff.flag, err)
		}
		f.overlay = append(f.overlay, override{flag: ff.flag, field: ff.field, value: v})
	}
	if k.Version != "true" && k.Version != "false" {
		// The kubelet's --version=raw prints its build's version.Info.
		return Flags{}, nil, fmt.Errorf("invalid argument %q for --version: want true or false", k.Version)
	}
	return f, warnings, nil
}

// override is a kubelet flag's value of a KubeletConfiguration field, as
// JSON.
type override struct {
	flag, field string
	value       any
}

func (k flagKind) parse(s string) (any, error) {
	switch k {
	case kindString:
		return s, nil
	case kindPath:
		if s == "" {
			return s, nil
		}
		return filepath.Abs(s)
	case kindInt:
		return strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	case kindBool:
		return strconv.ParseBool(s)
	case kindDuration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, err
		}
		return d.String(), nil
	case kindList:
		out := []string{}
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
		return out, nil
	case kindMap, kindMapLess:
		sep := "="
		if k == kindMapLess {
			sep = "<"
		}
		out := map[string]any{}
		for _, pair := range strings.Split(s, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			key, v, ok := strings.Cut(pair, sep)
			if !ok || strings.TrimSpace(key) == "" {
				return nil, fmt.Errorf("malformed pair %q, expect KEY%sVALUE", pair, sep)
			}
			out[strings.TrimSpace(key)] = strings.TrimSpace(v)
		}
		return out, nil
	case kindMapBool:
		out := map[string]any{}
		for _, pair := range strings.Split(s, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			key, v, ok := strings.Cut(pair, "=")
			if !ok {
				return nil, fmt.Errorf("missing bool value for %s", pair)
			}
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("invalid value of %s=%s: %w", key, v, err)
			}
			out[strings.TrimSpace(key)] = b
		}
		return out, nil
	case kindTaints:
		return parseTaints(s)
	}
	panic("config: unknown flag kind")
}

// parseTaints reads the kubelet's --register-with-taints:
// key[=value]:Effect, comma-separated (k8s.io/kubernetes/pkg/util/taints).
func parseTaints(s string) ([]v1.Taint, error) {
	out := []v1.Taint{}
	for _, spec := range strings.Split(s, ",") {
		if spec = strings.TrimSpace(spec); spec == "" {
			continue
		}
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, fmt.Errorf("invalid taint spec %q: want key[=value]:Effect", spec)
		}
		switch v1.TaintEffect(effect) {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("invalid taint effect %q in %q: want NoSchedule, PreferNoSchedule or NoExecute", effect, spec)
		}
		key, value, _ := strings.Cut(kv, "=")
		if key == "" {
			return nil, fmt.Errorf("invalid taint spec %q: no key", spec)
		}
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}
