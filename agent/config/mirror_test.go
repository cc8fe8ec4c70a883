package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestBootstrapKubeconfig(t *testing.T) {
	_, _, err := Load("", Flags{BootstrapKubecfg: "/etc/kubernetes/bootstrap-kubelet.conf", HostnameOverride: "n"})
	if err == nil || !strings.Contains(err.Error(), "bootstrapKubeconfig: needs --kubeconfig") {
		t.Fatalf("Load with --bootstrap-kubeconfig alone = %v, want a refusal naming --kubeconfig", err)
	}
	c, _, err := Load("", Flags{BootstrapKubecfg: "/etc/kubernetes/bootstrap-kubelet.conf",
		Kubeconfig: "/etc/kubernetes/kubelet.conf", RootDir: "/var/lib/x", HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if c.BootstrapKubeconfig != "/etc/kubernetes/bootstrap-kubelet.conf" || c.CertDir != "/var/lib/x/pki" || c.RotateCertificates {
		t.Errorf("bootstrap %q certDir %q (origin %q) rotate %v", c.BootstrapKubeconfig, c.CertDir, c.Origin("certDir"), c.RotateCertificates)
	}

	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nrotateCertificates: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, warnings, err := Load(path, Flags{CertDir: "/var/lib/kubelet/pki", HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 || !c.RotateCertificates || c.CertDir != "/var/lib/kubelet/pki" || c.Origin("certDir") != "flag --cert-dir" {
		t.Errorf("warnings %q rotate %v certDir %q (origin %q)", warnings, c.RotateCertificates, c.CertDir, c.Origin("certDir"))
	}
}

func TestNodeFieldsHonoured(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	cfg := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
registerNode: false
registerWithTaints: [{key: example.com/edge, effect: NoSchedule}]
nodeStatusUpdateFrequency: 4s
nodeLeaseDurationSeconds: 20
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, warnings, err := Load(path, Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q, want none: the node fields are honoured", warnings)
	}
	if c.RegisterNode || len(c.RegisterWithTaints) != 1 || c.RegisterWithTaints[0].Effect != v1.TaintEffectNoSchedule ||
		c.NodeStatusUpdateFrequency != 4*time.Second || c.NodeStatusReportFrequency != 4*time.Second || c.NodeLeaseDurationSeconds != 20 {
		t.Errorf("config %+v", c)
	}

	d, _, err := Load("", Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.RegisterNode || d.NodeStatusUpdateFrequency != 10*time.Second || d.NodeStatusReportFrequency != 5*time.Minute || d.NodeLeaseDurationSeconds != 40 {
		t.Errorf("defaults registerNode %v, update %v, report %v, lease %d", d.RegisterNode, d.NodeStatusUpdateFrequency, d.NodeStatusReportFrequency, d.NodeLeaseDurationSeconds)
	}
}
