//go:build linux

package kubeadm

import "strings"

// ignoredPreflight are the preflight errors kubeadm init, join and upgrade
// apply are told to ignore against staticpodd, each a named exception. The
// test fails when one of them no longer fires, so that the list only
// shrinks. The guide (docs/guides/kubeadm-air-gapped.md) gives the same list.
// The CRI checks (CRI, ContainerRuntimeVersion, ImagePull) pass: kubeadm
// calls the CRI before it has written /var/lib/kubelet/config.yaml, and
// staticpodd-cri.socket starts kubelet.service, which serves the CRI only
// until that file is there.
var ignoredPreflight = []string{
	// This host's cgroup v1: kubeadm v1.37 refuses it for any kubelet
	// (v1.35+) unless the check is skipped; not staticpodd's.
	"SystemVerification",
}

// ignoredUpgradePreflight are kubeadm upgrade apply's: the same.
var ignoredUpgradePreflight = ignoredPreflight

// ignoring is the flag that ignores the preflight errors named, if any.
func ignoring(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " --ignore-preflight-errors=" + strings.Join(names, ",")
}

// The guide's commands. Each is run as written here, on a machine, by
// TestKubeadm; the guide's test (guide_test.go) checks that every command
// in the guide is one of these.
const (
	guideImagesList   = "kubeadm config images list --kubernetes-version v1.37.2"
	guideImagesExport = "staticpodd images export $(kubeadm config images list --kubernetes-version v1.37.2) -o kubeadm-images.tar"
	guideImagesImport = "staticpodd images import kubeadm-images.tar"
	guideImagesLs     = "staticpodd images ls"
	guideInit         = "kubeadm init --config kubeadm.yaml"
	guideGetAll       = "kubectl get nodes,pods -A -o wide"
	guidePs           = "staticpodd ps"
	guideEditConfig   = "kubectl -n kube-system edit configmap kubeadm-config"
	guideCrictlPods   = "crictl pods"
	guideCrictlPs     = "crictl ps -a"
	guideCrictlImages = "crictl images"
	guideCrictlLogs   = "crictl logs --tail 5 $(crictl ps -q --name kube-apiserver)"
	guideUpgrade      = "kubeadm upgrade apply v1.37.2 --yes"
	guideReset        = "kubeadm reset -f --cri-socket unix:///run/staticpodd/cri.sock"
	guideUploadCerts  = "kubeadm init phase upload-certs --upload-certs --config kubeadm.yaml"
	guideJoinCommand  = "kubeadm token create --print-join-command"
	guideJoin         = `kubeadm join 192.0.2.10:6443 --token "$TOKEN" --discovery-token-ca-cert-hash "$HASH" --control-plane --certificate-key "$KEY" --node-name cp2 --apiserver-advertise-address 192.0.2.11 --cri-socket unix:///run/staticpodd/cri.sock`
)

// The kubeadm configuration of the guide: the CRI socket of staticpodd,
// the node's address, and cgroupfs for a machine whose init is not systemd.
const kubeadmYAML = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: %[1]s
nodeRegistration:
  name: %[2]s
  criSocket: unix:///run/staticpodd/cri.sock
  kubeletExtraArgs:
  - name: node-ip
    value: %[1]s
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
clusterName: air-gapped
controlPlaneEndpoint: %[1]s:6443
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
`

// guideInitLine and guideUpgradeLine are kubeadm init's and upgrade apply's
// command lines, with the preflight errors they ignore.
func guideInitLine() string { return guideInit + ignoring(ignoredPreflight) }

// guideJoinLine is kubeadm join --control-plane's, with the preflight
// errors it ignores: kubeadm init's.
func guideJoinLine() string { return guideJoin + ignoring(ignoredPreflight) }

func guideUpgradeLine() string {
	return guideUpgrade + ignoring(ignoredUpgradePreflight)
}

// guideCommands are the command lines TestKubeadm runs as the guide gives
// them; guide_test.go checks that the guide gives no other.
func guideCommands() []string {
	return []string{guideImagesList, guideImagesExport, guideImagesImport, guideImagesLs, guideInitLine(), guideGetAll,
		guidePs, guideUploadCerts, guideJoinCommand, guideJoinLine(), guideCrictlPods, guideCrictlPs, guideCrictlImages, guideCrictlLogs, guideEditConfig, guideUpgradeLine(),
		guideReset}
}
