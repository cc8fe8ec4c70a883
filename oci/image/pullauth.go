package image

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// CredentialPaths are the Docker config files searched for registry
// credentials, first found wins, as the kubelet's
// credentialprovider.ReadDockerConfigFile searches them: config.json in
// <root-dir> (ours), in the kubelet's root dir (its preferred path), in the
// working directory, ~/.docker and /.docker; then the legacy .dockercfg in
// the same directories but ~ and / themselves.
func CredentialPaths(rootDir string) []string {
	home, _ := os.UserHomeDir()
	dirs := []string{rootDir, "/var/lib/kubelet", "."}
	var out []string
	for _, d := range dirs {
		out = append(out, filepath.Join(d, "config.json"))
	}
	if home != "" {
		out = append(out, filepath.Join(home, ".docker", "config.json"))
	}
	out = append(out, "/.docker/config.json")
	for _, d := range dirs {
		out = append(out, filepath.Join(d, ".dockercfg"))
	}
	if home != "" {
		out = append(out, filepath.Join(home, ".dockercfg"))
	}
	return append(out, "/.dockercfg")
}

// credential is one entry of a Docker config: a registry (with an optional
// path and * globs in the host's labels) and its basic-auth user and password.
type credential struct {
	key        string // the entry's key as parsed, host[/path]: the order of entries
	host, path string
	user, pass string
}

// Keyring holds the credentials of one Docker config file. Credential
// helpers (credsStore, credHelpers) are not run, as the kubelet does not run
// them.
type Keyring struct {
	file  string
	creds []credential // longest key first, as the kubelet's BasicDockerKeyring
}

// LoadKeyring reads the first Docker config among paths that exists. None
// existing is an empty keyring; a file that exists but cannot be read is an
// error naming it.
func LoadKeyring(paths []string) (*Keyring, error) {
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read registry credentials %s: %w", p, err)
		}
		k, err := parseDockerConfig(b, filepath.Base(p) == ".dockercfg")
		if err != nil {
			return nil, fmt.Errorf("read registry credentials %s: %w", p, err)
		}
		k.file = p
		return k, nil
	}
	return &Keyring{}, nil
}

// File is the config file the keyring was read from ("" if none was found).
func (k *Keyring) File() string { return k.file }

type dockerAuth struct {
	Auth     string `json:"auth"`
	Username string `json:"username"`
	Password string `json:"password"`
}

func parseDockerConfig(b []byte, legacy bool) (*Keyring, error) {
	var auths map[string]dockerAuth
	if legacy {
		if err := json.Unmarshal(b, &auths); err != nil {
			return nil, jsonError(err)
		}
	} else {
		var cfg struct {
			Auths map[string]dockerAuth `json:"auths"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, jsonError(err)
		}
		auths = cfg.Auths
	}
	k := &Keyring{}
	keys := make([]string, 0, len(auths))
	for key := range auths {
		keys = append(keys, key)
	}
	// The kubelet tries keys in reverse lexical order: the most specific first.
	slices.Sort(keys)
	slices.Reverse(keys)
	for _, key := range keys {
		a := auths[key]
		user, pass := a.Username, a.Password
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("auths.%q.auth: not base64: %w", key, err)
			}
			u, p, ok := strings.Cut(string(dec), ":")
			if !ok {
				return nil, fmt.Errorf("auths.%q.auth: want base64 of user:password", key)
			}
			user, pass = u, p
		}
		host, path := parseCredKey(key)
		k.creds = append(k.creds, credential{key: host + "/" + path, host: host, path: path, user: user, pass: pass})
	}
	return k, nil
}

// jsonError is err of json.Unmarshal without the bytes it quotes: a syntax
// error quotes a character of the file, which may be one of a password's.
func jsonError(err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Errorf("not JSON: syntax error at byte %d", se.Offset)
	}
	return err
}

// parseCredKey splits a Docker config key (a host, host/path or URL) as the
// kubelet's parseSchemelessURL does; Docker Hub's keys become docker.io.
func parseCredKey(key string) (host, path string) {
	if !strings.Contains(key, "://") {
		key = "https://" + key
	}
	u, err := url.Parse(key)
	if err != nil {
		return key, ""
	}
	host, path = u.Host, strings.Trim(u.Path, "/")
	switch host {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		host = "docker.io"
		if path == "v1" || path == "v2" {
			path = ""
		}
	}
	return host, path
}

// matchHost matches a host against a key's host, whose labels may be * globs
// (the kubelet's URLsMatch): same number of labels, same port.
func matchHost(pattern, host string) bool {
	ph, pp := splitPort(pattern)
	hh, hp := splitPort(host)
	if pp != hp {
		return false
	}
	pl, hl := strings.Split(ph, "."), strings.Split(hh, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, _ := filepath.Match(pl[i], hl[i]); !ok {
			return false
		}
	}
	return true
}

func splitPort(h string) (string, string) {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		return h[:i], h[i+1:]
	}
	return h, ""
}

// lookup returns the credentials for repository repo of registry (or of a
// mirror host standing in for it), if any.
func (k *Keyring) lookup(registry, repo string) (credential, bool) {
	for _, c := range k.creds {
		if c.matches(registry, repo) {
			return c, true
		}
	}
	return credential{}, false
}

// matches is every credential for repository repo of registry, the most
// specific key first (the kubelet's BasicDockerKeyring.Lookup).
func (k *Keyring) matches(registry, repo string) []credential {
	var out []credential
	for _, c := range k.creds {
		if c.matches(registry, repo) {
			out = append(out, c)
		}
	}
	return out
}

// matches says whether c is for repository repo of registry: its host, and
// its path if it has one, a prefix of repo's path segments.
func (c credential) matches(registry, repo string) bool {
	return matchHost(c.host, registry) && (c.path == "" || repo == c.path || strings.HasPrefix(repo, c.path+"/"))
}

// secretsKeyring is the keyring of a pod's pull secrets: the entries of all
// of them in one, as the kubelet's secretsToTrackedDockerConfigs adds them to
// one BasicDockerKeyring, the most specific key first and, under one key,
// the secrets in the pod's order. An error names the Secret, never a value.
func secretsKeyring(secrets []podspec.PullSecret) (*Keyring, error) {
	all := &Keyring{}
	for _, s := range secrets {
		k, err := parseDockerConfig(s.Config, s.Legacy)
		if err != nil {
			return nil, fmt.Errorf("image pull secret %s: %w", s.Name, err)
		}
		all.creds = append(all.creds, k.creds...)
	}
	slices.SortStableFunc(all.creds, func(a, b credential) int { return strings.Compare(b.key, a.key) })
	return all, nil
}

// Resolve implements authn.Keychain for go-containerregistry.
func (k *Keyring) Resolve(r authn.Resource) (authn.Authenticator, error) {
	repo := ""
	if rr, ok := r.(interface{ RepositoryStr() string }); ok {
		repo = rr.RepositoryStr()
	}
	if c, ok := k.lookup(registryHost(r), repo); ok {
		return &authn.Basic{Username: c.user, Password: c.pass}, nil
	}
	return authn.Anonymous, nil
}

// registryHost is the registry a keychain is asked about, Docker Hub's hosts
// spelled docker.io as config.json files and references key it
// (https://index.docker.io/v1/).
func registryHost(r authn.Resource) string {
	switch host := r.RegistryStr(); host {
	case "index.docker.io", "registry-1.docker.io":
		return "docker.io"
	default:
		return host
	}
}

// pullAuth is the keychain of a pull that brings its own credential
// (PullOptions.Auth): that credential for the image's registry, next for
// every other host.
type pullAuth struct {
	registry string // the image's registry, as registryHost spells it
	auth     authn.Authenticator
	next     authn.Keychain
}

func (k pullAuth) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if registryHost(r) == k.registry {
		return k.auth, nil
	}
	return k.next.Resolve(r)
}

// authKey tells credentials apart without keeping them: a digest of a.
func authKey(a *authn.AuthConfig) string {
	h := sha256.New()
	for _, f := range []string{a.Username, a.Password, a.Auth, a.IdentityToken, a.RegistryToken} {
		fmt.Fprintf(h, "%d:%s", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}
