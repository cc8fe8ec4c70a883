package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// /configz is the kubelet's: a v1beta1 KubeletConfiguration that decodes
// strictly into the kubelet's type (the node e2e suites decode it so), with
// the effective values: the file's, the flags' over them, staticpodd's own
// defaults, and secrets redacted.
func TestKubeletConfigz(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
fileCheckFrequency: 10s
readOnlyPort: 10255
allowedUnsafeSysctls: [net.core.somaxconn]
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
staticPodURLHeader: {Authorization: ["Bearer secret"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var fl Flags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fl.Register(fs)
	if err := fs.Parse([]string{"--hostname-override", "n", "--pod-manifest-path", "/etc/pods", "--manifest-url", "https://u:pw@example.com/pods"}); err != nil {
		t.Fatal(err)
	}
	c, _, err := Load(p, fl)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Kubelet()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var kc kubeletConfiguration
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&kc); err != nil {
		t.Fatalf("/configz does not decode as a KubeletConfiguration: %v\n%s", err, b)
	}
	if kc.StaticPodPath != "/etc/pods" || kc.FileCheckFrequency.Duration.String() != "10s" || kc.ReadOnlyPort != 10255 {
		t.Errorf("staticPodPath %q fileCheckFrequency %v readOnlyPort %d", kc.StaticPodPath, kc.FileCheckFrequency, kc.ReadOnlyPort)
	}
	if len(kc.AllowedUnsafeSysctls) != 1 || kc.Authentication.Anonymous.Enabled == nil || !*kc.Authentication.Anonymous.Enabled ||
		kc.Authorization.Mode != "AlwaysAllow" {
		t.Errorf("allowedUnsafeSysctls %v authentication %+v authorization %+v", kc.AllowedUnsafeSysctls, kc.Authentication, kc.Authorization)
	}
	// address is the node API's, the kubelet's default (the read-only port
	// listens on loopback all the same); the healthz port is the kubelet's.
	if kc.Address != "0.0.0.0" || kc.HealthzPort == nil || *kc.HealthzPort != 10248 {
		t.Errorf("address %q healthzPort %v", kc.Address, kc.HealthzPort)
	}
	if strings.Contains(string(b), "secret") || strings.Contains(string(b), "pw@") {
		t.Errorf("/configz shows a secret: %s", b)
	}
}
