//go:build linux

package kubeadm

// The mirror pods guide's (docs/guides/mirror-pods.md) commands, which
// TestKubeadm runs as written on cp1 and on an appliance machine, edge1;
// guides_test.go checks that the guide gives no other.
const (
	mgTokenCreate    = "kubeadm token create --ttl 2h"
	mgSetCluster     = "kubectl config set-cluster cluster --server=https://192.0.2.10:6443 --certificate-authority=/etc/staticpodd/ca.crt --embed-certs --kubeconfig=/etc/staticpodd/bootstrap-kubeconfig"
	mgSetCredentials = `kubectl config set-credentials bootstrap --token="$TOKEN" --kubeconfig=/etc/staticpodd/bootstrap-kubeconfig`
	mgSetContext     = "kubectl config set-context bootstrap --cluster=cluster --user=bootstrap --kubeconfig=/etc/staticpodd/bootstrap-kubeconfig"
	mgUseContext     = "kubectl config use-context bootstrap --kubeconfig=/etc/staticpodd/bootstrap-kubeconfig"
	mgArgs           = `echo 'STATICPODD_ARGS="--bootstrap-kubeconfig /etc/staticpodd/bootstrap-kubeconfig --kubeconfig /etc/staticpodd/kubeconfig --hostname-override edge1"' > /etc/default/staticpodd`
	mgRotate         = "echo 'rotateCertificates: true' >> /etc/staticpodd/config.yaml"
	mgRestart        = "systemctl restart staticpodd"
	mgGetCSR         = "kubectl get csr"
	mgGetNode        = "kubectl get node edge1"
	mgGetPods        = "kubectl get pods -A -o wide --field-selector spec.nodeName=edge1"
	mgStopAPI        = "mv /etc/kubernetes/manifests/kube-apiserver.yaml /root/"
	mgPs             = "staticpodd ps"
	mgHealthz        = "curl -s --unix-socket /run/staticpodd/staticpodd.sock 'http://localhost/healthz?verbose'"
	mgStartAPI       = "mv /root/kube-apiserver.yaml /etc/kubernetes/manifests/"
)

// mirrorGuideCommands are the guide's commands, in its order.
var mirrorGuideCommands = []string{mgTokenCreate, mgSetCluster, mgSetCredentials, mgSetContext, mgUseContext, mgArgs, mgRotate, mgRestart, mgGetCSR, mgGetNode, mgGetPods, mgStopAPI, mgPs, mgHealthz, mgStartAPI}
