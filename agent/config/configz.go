package config

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Kubelet is the effective configuration as the kubelet's /configz shows it
// under "kubeletconfig": a v1beta1 KubeletConfiguration in JSON, the file's
// fields with the kubelet's defaults, and over them every value staticpodd
// takes from a flag or a default of its own (so that a client decoding it,
// such as the node e2e suites, reads what the daemon runs with). Secrets are
// redacted: the password of staticPodURL and the values of
// staticPodURLHeader.
func (c *Config) Kubelet() (map[string]any, error) {
	kc := c.kubelet
	if kc == nil {
		kc = &kubeletConfiguration{}
		setDefaults(kc)
	}
	m, err := toMap(kc)
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		if f.file == "" {
			continue
		}
		v, ok := jsonValue(f.value.addr(c))
		if !ok {
			continue
		}
		setPath(m, strings.Split(f.file, "."), v)
	}
	if len(c.StaticPodURLHeader) > 0 {
		m["staticPodURLHeader"] = redactedHeaderMap(c.StaticPodURLHeader)
	}
	if c.StaticPodURL != "" {
		m["staticPodURL"] = redactURL(c.StaticPodURL)
	}
	return m, nil
}

// jsonValue is the value at p as KubeletConfiguration's JSON has it, for the
// plain types; false for the others, which keep the file's defaulted value.
func jsonValue(p any) (any, bool) {
	switch v := p.(type) {
	case *string:
		return *v, true
	case *bool:
		return *v, true
	case *int32:
		return *v, true
	case *int64:
		return *v, true
	case *time.Duration:
		return v.String(), true // metav1.Duration's JSON
	case *[]string:
		return *v, true
	case *map[string]string:
		return *v, true
	}
	return nil, false
}

// setPath sets m[path[0]][path[1]]... to v, making the objects on the way.
// A zero value is not set where the kubelet's JSON has none (an optional
// field left unset), nor a value of another JSON kind than the kubelet's
// (containerLogMaxSize is bytes here, a quantity there): the file's
// defaulted value is the effective one then.
func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		sub, ok := m[k].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[k] = sub
		}
		m = sub
	}
	last := path[len(path)-1]
	old, set := m[last]
	if !set && isZero(v) || set && old != nil && kind(old) != kind(v) {
		return
	}
	m[last] = v
}

// kind is the JSON kind of v: what its encoding starts with.
func kind(v any) byte {
	b, _ := json.Marshal(v)
	switch {
	case len(b) == 0:
		return 0
	case b[0] == 't' || b[0] == 'f':
		return 'b'
	case b[0] == '-' || b[0] >= '0' && b[0] <= '9':
		return '0'
	case b[0] == 'n':
		return 'n'
	}
	return b[0]
}

func isZero(v any) bool {
	b, _ := json.Marshal(v)
	switch string(b) {
	case `""`, "0", "false", "null", "[]", "{}", `"0s"`:
		return true
	}
	return false
}

// redactedHeaderMap is h with every value replaced.
func redactedHeaderMap(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		r := make([]string, len(vs))
		for i := range vs {
			r[i] = "(redacted)"
		}
		out[k] = r
	}
	return out
}
