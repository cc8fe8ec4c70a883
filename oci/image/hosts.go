package image

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// DefaultHostsDir is where containerd keeps its registry host configuration; the
// daemon reads the same layout (--registry-config-dir).
const DefaultHostsDir = "/etc/containerd/certs.d"

// Capabilities of a registry host, as in containerd's hosts.toml.
const (
	capPull    = "pull"
	capResolve = "resolve"
)

// endpoint is one place to pull a registry's images from: a mirror of a
// hosts.toml, or the registry itself.
type endpoint struct {
	scheme string // https or http
	host   string // host[:port]
	// path is the URL path the registry API lives under: "/v2", or a
	// hosts.toml entry's own path with override_path.
	path   string
	caps   []string
	client *http.Client
	// fallback: an https endpoint that is tried again over plain HTTP when
	// the server answers TLS in HTTP (a loopback registry, see
	// loopbackEndpoint).
	fallback bool
}

func (e endpoint) can(c string) bool { return slices.Contains(e.caps, c) }

func (e endpoint) String() string {
	return e.scheme + "://" + e.host + strings.TrimSuffix(e.path, "/v2")
}

// hostEntry is one table of a hosts.toml: the top-level server, or a
// [host."URL"] mirror (containerd's hostFileConfig).
type hostEntry struct {
	Capabilities []string       `toml:"capabilities"`
	CA           any            `toml:"ca"`     // a path or a list of them
	Client       any            `toml:"client"` // cert, [cert, key] or [[cert, key], ...]
	SkipVerify   *bool          `toml:"skip_verify"`
	Header       map[string]any `toml:"header"`
	OverridePath bool           `toml:"override_path"`
}

type hostsFile struct {
	Server string `toml:"server"`
	hostEntry
	Host map[string]hostEntry `toml:"host"`
}

// hostsDirFor is the directory of registry host's hosts.toml, as containerd
// names it: the host, with a port, as it is written in references.
func hostsDirFor(dir, host string) string {
	return filepath.Join(dir, host)
}

// endpoints returns where to pull images of registry (a reference's registry,
// docker.io for Docker Hub) from, in order: the mirrors of its hosts.toml
// (or of _default/hosts.toml), then its server. Without a hosts.toml it is the
// registry alone, over HTTPS, or for a registry on the loopback HTTPS then
// plain HTTP (containerd's config.ConfigureHosts).
func endpoints(dir, registry string, timeout time.Duration) ([]endpoint, error) {
	if strings.ContainsAny(registry, `/\`) || registry == "" || registry == "." || registry == ".." {
		return nil, fmt.Errorf("registry host %q: not a host name", registry)
	}
	if dir != "" {
		for _, d := range []string{hostsDirFor(dir, registry), filepath.Join(dir, "_default")} {
			path := filepath.Join(d, "hosts.toml")
			b, err := os.ReadFile(path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("registry config %s: %w", path, err)
			}
			eps, err := parseHosts(b, d, registry, timeout)
			if err != nil {
				return nil, fmt.Errorf("registry config %s: %w", path, err)
			}
			return eps, nil
		}
	}
	if isLoopback(registry) {
		return []endpoint{loopbackEndpoint(registry, timeout)}, nil
	}
	return []endpoint{{scheme: "https", host: defaultServerHost(registry), path: "/v2",
		caps: []string{capPull, capResolve}, client: newClient(&tls.Config{}, timeout)}}, nil
}

// defaultServerHost is where a registry's API is when nothing says otherwise:
// Docker Hub's is registry-1.docker.io.
func defaultServerHost(registry string) string {
	if registry == "docker.io" || registry == "index.docker.io" {
		return "registry-1.docker.io"
	}
	return registry
}

// parseHosts reads one hosts.toml of directory dir, for registry.
func parseHosts(b []byte, dir, registry string, timeout time.Duration) ([]endpoint, error) {
	var f hostsFile
	if err := toml.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	order, err := hostOrder(b)
	if err != nil {
		return nil, err
	}
	var eps []endpoint
	for _, u := range order {
		e, ok := f.Host[u]
		if !ok {
			continue
		}
		ep, err := makeEndpoint(u, e, dir, timeout)
		if err != nil {
			return nil, fmt.Errorf("host %q: %w", u, err)
		}
		eps = append(eps, ep)
	}
	server := f.Server
	if server == "" {
		server = "https://" + defaultServerHost(registry)
	}
	ep, err := makeEndpoint(server, f.hostEntry, dir, timeout)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", server, err)
	}
	return append(eps, ep), nil
}

// hostOrder returns the [host."URL"] tables of a hosts.toml in the order
// they are written: the order mirrors are tried in.
func hostOrder(b []byte) ([]string, error) {
	var p unstable.Parser
	p.Reset(b)
	var order []string
	for p.NextExpression() {
		n := p.Expression()
		if n.Kind != unstable.Table {
			continue
		}
		var parts []string
		for it := n.Key(); it.Next(); {
			parts = append(parts, string(it.Node().Data))
		}
		if len(parts) == 2 && parts[0] == "host" && !slices.Contains(order, parts[1]) {
			order = append(order, parts[1])
		}
	}
	return order, p.Error()
}

// makeEndpoint turns a hosts.toml table into an endpoint. Paths of ca and
// client certificates are relative to the hosts.toml's directory.
func makeEndpoint(raw string, e hostEntry, dir string, timeout time.Duration) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, err
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return endpoint{}, errors.New("want an http:// or https:// URL")
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return endpoint{}, errors.New("want scheme://host[:port][/path] only")
	}
	ep := endpoint{scheme: u.Scheme, host: u.Host, caps: e.Capabilities}
	path := strings.TrimSuffix(u.Path, "/")
	if e.OverridePath {
		ep.path = path
	} else {
		ep.path = path + "/v2"
	}
	if ep.caps == nil {
		// containerd's default: pull and resolve (and push, which we never do).
		ep.caps = []string{capPull, capResolve}
	}
	for _, c := range ep.caps {
		if c != capPull && c != capResolve && c != "push" {
			return endpoint{}, fmt.Errorf("capabilities: unknown %q (want pull, resolve, push)", c)
		}
	}
	tc := &tls.Config{}
	if e.SkipVerify != nil && *e.SkipVerify {
		tc.InsecureSkipVerify = true
	}
	cas, err := stringList(e.CA, "ca")
	if err != nil {
		return endpoint{}, err
	}
	if len(cas) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		for _, ca := range cas {
			pem, err := os.ReadFile(relTo(dir, ca))
			if err != nil {
				return endpoint{}, fmt.Errorf("ca: %w", err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return endpoint{}, fmt.Errorf("ca %s: no PEM certificate", ca)
			}
		}
		tc.RootCAs = pool
	}
	pairs, err := clientPairs(e.Client)
	if err != nil {
		return endpoint{}, err
	}
	for _, p := range pairs {
		key := p[1]
		if key == "" {
			key = strings.TrimSuffix(p[0], filepath.Ext(p[0])) + ".key"
		}
		cert, err := tls.LoadX509KeyPair(relTo(dir, p[0]), relTo(dir, key))
		if err != nil {
			return endpoint{}, fmt.Errorf("client: %w", err)
		}
		tc.Certificates = append(tc.Certificates, cert)
	}
	headers := http.Header{}
	for k, v := range e.Header {
		vals, err := stringList(v, "header."+k)
		if err != nil {
			return endpoint{}, err
		}
		for _, s := range vals {
			headers.Add(k, s)
		}
	}
	ep.client = newClient(tc, timeout)
	if len(headers) > 0 {
		ep.client.Transport = headerTransport{headers, ep.client.Transport}
	}
	return ep, nil
}

func relTo(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// stringList reads a TOML value that is a string or a list of strings.
func stringList(v any, field string) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, s := range v {
			str, ok := s.(string)
			if !ok {
				return nil, fmt.Errorf("%s: want a string or a list of strings", field)
			}
			out = append(out, str)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want a string or a list of strings", field)
}

// clientPairs reads containerd's client field: "cert" (key beside it, .key),
// ["cert", "key"], or [["cert", "key"], ...].
func clientPairs(v any) ([][2]string, error) {
	const bad = "client: want \"cert\", [\"cert\", \"key\"] or [[\"cert\", \"key\"], ...]"
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return [][2]string{{v, ""}}, nil
	case []any:
		if len(v) == 0 {
			return nil, nil
		}
		if _, ok := v[0].(string); ok {
			s, err := stringList(v, "client")
			if err != nil || len(s) != 2 {
				return nil, errors.New(bad)
			}
			return [][2]string{{s[0], s[1]}}, nil
		}
		var out [][2]string
		for _, p := range v {
			s, err := stringList(p, "client")
			if err != nil || len(s) < 1 || len(s) > 2 {
				return nil, errors.New(bad)
			}
			pair := [2]string{s[0], ""}
			if len(s) == 2 {
				pair[1] = s[1]
			}
			out = append(out, pair)
		}
		return out, nil
	}
	return nil, errors.New(bad)
}

// newClient is an HTTP client for one registry endpoint: bounded dial, TLS
// handshake and response header waits (a body is bounded by the pull itself).
func newClient(tc *tls.Config, timeout time.Duration) *http.Client {
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: t}
}

// headerTransport adds a hosts.toml's headers to every request.
type headerTransport struct {
	h    http.Header
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[http.CanonicalHeaderKey(k)] = v
	}
	return t.next.RoundTrip(r)
}

// CloseIdleConnections passes http.Client's CloseIdleConnections on.
func (t headerTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
