package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestBootstrapKubeconfigIsRefusedWithAReason(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kubelet.conf")
	for _, kubeconfig := range []string{"", missing} {
		_, _, err := Load("", Flags{BootstrapKubecfg: "/etc/kubernetes/bootstrap-kubelet.conf", Kubeconfig: kubeconfig, HostnameOverride: "n"})
		if err == nil || !strings.Contains(err.Error(), "--bootstrap-kubeconfig: TLS bootstrap is not supported") ||
			!strings.Contains(err.Error(), "--kubeconfig") {
			t.Fatalf("Load with --bootstrap-kubeconfig, --kubeconfig %q = %v, want a refusal naming --kubeconfig", kubeconfig, err)
		}
	}
	// As the kubelet, no bootstrap is needed while the kubeconfig is there:
	// kubeadm init writes kubelet.conf before it starts the kubelet.
	if err := os.WriteFile(missing, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load("", Flags{BootstrapKubecfg: "/etc/kubernetes/bootstrap-kubelet.conf", Kubeconfig: missing, HostnameOverride: "n"}); err != nil {
		t.Fatalf("Load with --bootstrap-kubeconfig and an existing --kubeconfig: %v", err)
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
