package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	kubeletapis "k8s.io/kubelet/pkg/apis"
)

// problems collects the errors of validation, each prefixed with the key of
// the field being checked.
type problems struct {
	key  string
	errs []error
}

func (p *problems) bad(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", p.key, fmt.Sprintf(format, args...)))
}

func notNegative(at func(*Config) time.Duration) func(*Config, *problems) {
	return func(c *Config, p *problems) {
		if d := at(c); d < 0 {
			p.bad("%v is negative", d)
		}
	}
}

func absolute(at func(*Config) string) func(*Config, *problems) {
	return func(c *Config, p *problems) {
		if dir := at(c); !filepath.IsAbs(dir) {
			p.bad("%q is not an absolute path", dir)
		}
	}
}

func percent(at func(*Config) int32) func(*Config, *problems) {
	return func(c *Config, p *problems) {
		if v := at(c); v < 0 || v > 100 {
			p.bad("%d is not between 0 and 100", v)
		}
	}
}

func oneOf(at func(*Config) string, a, b string) func(*Config, *problems) {
	return func(c *Config, p *problems) {
		if v := at(c); v != a && v != b {
			p.bad("%q is neither %s nor %s", v, a, b)
		}
	}
}

// checkNodeLabels is the kubelet's ValidateKubeletFlags for
// --node-labels: valid keys and values, and of the kubernetes.io and
// k8s.io namespaces only the labels a kubelet may set on its own Node (the
// NodeRestriction admission plugin refuses the others).
func checkNodeLabels(c *Config, p *problems) {
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(c.NodeLabels)) {
		ns, _, _ := strings.Cut(k, "/")
		if !strings.Contains(k, "/") {
			ns = ""
		}
		kube := ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
		if kube && !kubeletapis.IsKubeletLabel(k) {
			unknown = append(unknown, k)
		}
		for _, e := range validation.IsQualifiedName(k) {
			p.bad("%q: %s", k, e)
		}
		for _, e := range validation.IsValidLabelValue(c.NodeLabels[k]) {
			p.bad("%q=%q: %s", k, c.NodeLabels[k], e)
		}
	}
	if len(unknown) > 0 {
		p.bad("unknown 'kubernetes.io' or 'k8s.io' labels %v: labels in the 'kubernetes.io' namespace must begin with an allowed prefix (%s) or be in the specifically allowed set (%s)",
			unknown, strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "), strings.Join(kubeletapis.KubeletLabels(), ", "))
	}
}

// ownCRISocket accepts an endpoint that names staticpodd's CRI socket,
// unix:// or, as the kubelet falls back to unix, a plain path; "" too.
func ownCRISocket(at func(*Config) string) func(*Config, *problems) {
	return func(c *Config, p *problems) {
		ep := at(c)
		if ep == "" {
			return
		}
		path, ok := strings.CutPrefix(ep, "unix://")
		if !ok && strings.Contains(ep, "://") {
			path = ""
		}
		if path == "" || filepath.Clean(path) != c.CRISocket() {
			p.bad("%q: staticpodd is the container runtime, and serves the CRI at unix://%s (kubeadm: nodeRegistration.criSocket); no other runtime is used", ep, c.CRISocket())
		}
	}
}
