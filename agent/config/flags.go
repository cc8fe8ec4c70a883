package config

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/pflag"
)

// Flag names, as in docs/configuration.md ("Flags") and the kubelet.
const (
	FlagConfig            = "config"
	FlagPodManifestPath   = "pod-manifest-path"
	FlagManifestURL       = "manifest-url"
	FlagManifestURLHeader = "manifest-url-header"
	FlagManifestURLCA     = "manifest-url-ca"
	FlagHostnameOverride  = "hostname-override"
	FlagNodeIP            = "node-ip"
	FlagNodeLabels        = "node-labels"
	// FlagRegisterSchedulable is the kubelet's removed --register-schedulable.
	FlagRegisterSchedulable = "register-schedulable"
	FlagKubeconfig          = "kubeconfig"
	// FlagBootstrapKubeconfig is the kubelet's TLS bootstrap: the
	// credentials to request the node's client certificate with when
	// --kubeconfig has none valid; FlagCertDir is where the certificate
	// is kept (kubelet-client-current.pem).
	FlagBootstrapKubeconfig = "bootstrap-kubeconfig"
	FlagCertDir             = "cert-dir"
	FlagRootDir             = "root-dir"
	// FlagRegistryConfigDir holds registry mirrors and TLS settings in
	// containerd's hosts.toml layout.
	FlagRegistryConfigDir = "registry-config-dir"
	FlagRunDir            = "run-dir"
	// The pod network: the kubelet's CNI flags of its dockershim days, its
	// --pod-cidr, and the bridge of staticpodd's default network.
	FlagCNIConfDir       = "cni-conf-dir"
	FlagCNIBinDir        = "cni-bin-dir"
	FlagCNICacheDir      = "cni-cache-dir"
	FlagPodCIDR          = "pod-cidr"
	FlagPodNetworkBridge = "pod-network-bridge"
	// FlagCredentialsDirectory is where Secrets' credentials are read
	// (default $CREDENTIALS_DIRECTORY).
	FlagCredentialsDirectory = "credentials-directory"
	// FlagImagePolicy is the image signature policy, a
	// containers-policy.json(5) file.
	FlagImagePolicy = "image-policy"
)

// EnvImagePolicy gives imagePolicyFile when --image-policy does not: set
// for the daemon and the CLI alike (as STATICPODD_ROOT_DIR is), so that
// `staticpodd images import` run by hand meets the daemon's policy.
const EnvImagePolicy = "STATICPODD_IMAGE_POLICY"

// FlagImagePullProgressTimeout is containerd's image_pull_progress_timeout:
// the progress deadline of a registry's response body.
const FlagImagePullProgressTimeout = "image-pull-progress-timeout"

// Defaults of the pod network.
const (
	// DefaultCNIConfDir is where CNI configuration is looked for, as the
	// kubelet's --cni-conf-dir and containerd's conf_dir default it.
	DefaultCNIConfDir = "/etc/cni/net.d"
	// DefaultPodNetworkBridge is the bridge of the built-in default network.
	DefaultPodNetworkBridge = "staticpodd0"
	// DefaultPodCIDR is the built-in default network's range: private, and
	// clear of podman's (10.88.0.0/16, 10.89.x for its other networks),
	// CRI-O's (10.85.0.0/16), Docker's (172.17.0.0/16), kind's and
	// flannel's (10.244.0.0/16) and k3s's (10.42.0.0/16, 10.43.0.0/16)
	// defaults.
	DefaultPodCIDR = "10.86.0.0/16"
)

// DefaultCNIBinDirs are where CNI plugins are looked for: the upstream
// place and the one Debian's and Fedora's containernetworking-plugins use.
var DefaultCNIBinDirs = []string{"/opt/cni/bin", "/usr/lib/cni"}

// Environment variables that give --root-dir and --run-dir when the flag is
// not given, to the daemon and every CLI command alike (as
// CONTAINER_RUNTIME_ENDPOINT does for crictl): a flag wins over its variable,
// which wins over the default. A KubeletConfiguration has no field for
// either (the kubelet's --root-dir is a flag only), so the config file does
// not give them.
const (
	EnvRootDir = "STATICPODD_ROOT_DIR"
	EnvRunDir  = "STATICPODD_RUN_DIR"
)

// EnvCredentialsDirectory is where systemd puts the credentials of the
// daemon's unit (LoadCredential=, LoadCredentialEncrypted=,
// SetCredentialEncrypted=): credentialsDirectory when no flag gives it.
const EnvCredentialsDirectory = "CREDENTIALS_DIRECTORY"

// Flags are the command-line values that configure the daemon. A flag overrides
// the config file only when it was given.
//
// Register adds all but --root-dir and --run-dir, which the root command declares
// for every subcommand. Load finds those two (value and whether they were given) in
// the FlagSet Register was called with, since cobra merges the parents' persistent
// flags into it. Without a FlagSet (Flags built by hand, in tests), a non-empty
// field counts as given.
type Flags struct {
	ConfigFile          string
	PodManifestPath     string
	ManifestURL         string
	ManifestURLHeaders  []string // 'Key:Value', each may hold several comma-separated
	ManifestURLCA       string
	HostnameOverride    string
	NodeIP              string
	NodeLabels          []string // 'key=value,...', repeatable
	RegisterSchedulable string   // "true" or "false"
	Kubeconfig          string
	BootstrapKubecfg    string
	CertDir             string
	RegistryConfigDir   string
	RootDir             string
	RunDir              string
	CNIConfDir          string
	CNIBinDir           string // comma-separated
	CNICacheDir         string
	PodCIDR             string
	PodNetworkBridge    string
	CredentialsDir      string
	ImagePolicy         string

	// ImagePullProgressTimeout is a duration, "" = the default.
	ImagePullProgressTimeout string

	fs *pflag.FlagSet
	// kubelet: the kubelet personality's (KubeletFlags.Resolve), whose
	// defaults are the kubelet's where staticpodd's differ (--cert-dir).
	kubelet bool
	// overlay: the kubelet flags that set KubeletConfiguration fields,
	// which win over the file's.
	overlay []override
}

// Register adds the configuration flags to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	f.fs = fs
	for _, d := range fields {
		switch {
		case d.shared:
		case d.flagList != nil:
			fs.StringArrayVar(d.flagList(f), d.flag, nil, d.help)
		case d.flagValue != nil:
			fs.StringVar(d.flagValue(f), d.flag, "", d.help)
		}
	}
}

// given reports whether flag name was set on the command line, and its value.
func (f *Flags) given(name string) (string, bool) {
	if f.fs != nil {
		if fl := f.fs.Lookup(name); fl != nil {
			return fl.Value.String(), fl.Changed
		}
	}
	var v string
	for _, d := range fields {
		if d.flag == name && d.flagValue != nil {
			v = *d.flagValue(f)
		}
	}
	return v, v != ""
}

// ParseHeaders reads 'Key:Value' pairs, several to an argument when separated by
// commas, as the kubelet's --manifest-url-header does. Repeated keys add values.
func ParseHeaders(args []string) (http.Header, error) {
	h := http.Header{}
	for _, arg := range args {
		for _, pair := range strings.Split(arg, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, ":")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, fmt.Errorf("--%s %q: want 'Key:Value'", FlagManifestURLHeader, pair)
			}
			h[k] = append(h[k], strings.TrimSpace(v))
		}
	}
	return h, nil
}
