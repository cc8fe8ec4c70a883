//go:build linux

package kubeadm

// The Prometheus guide's (docs/guides/prometheus.md) files and commands,
// which TestKubeadm writes and runs on cp1, as written, after kubeadm init;
// guides_test.go checks that the guide gives no other.
const (
	promRBAC = `apiVersion: v1
kind: Namespace
metadata:
  name: monitoring
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: prometheus
  namespace: monitoring
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: node-metrics-reader
rules:
- apiGroups: [""]
  resources: ["nodes/metrics", "nodes/stats"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prometheus-node-metrics
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: node-metrics-reader
subjects:
- kind: ServiceAccount
  name: prometheus
  namespace: monitoring
`
	promConfig = `global:
  scrape_interval: 10s
scrape_configs:
- job_name: node-api
  scheme: https
  authorization:
    credentials_file: /root/prometheus.token
  tls_config:
    ca_file: /var/lib/kubelet/pki/kubelet.crt
    server_name: cp1
  static_configs:
  - targets: ["cp1:10250"]
- job_name: node-api-cadvisor
  scheme: https
  metrics_path: /metrics/cadvisor
  authorization:
    credentials_file: /root/prometheus.token
  tls_config:
    ca_file: /var/lib/kubelet/pki/kubelet.crt
    server_name: cp1
  static_configs:
  - targets: ["cp1:10250"]
- job_name: node-api-probes
  scheme: https
  metrics_path: /metrics/probes
  authorization:
    credentials_file: /root/prometheus.token
  tls_config:
    ca_file: /var/lib/kubelet/pki/kubelet.crt
    server_name: cp1
  static_configs:
  - targets: ["cp1:10250"]
- job_name: read-only-port
  metrics_path: /metrics/cadvisor
  static_configs:
  - targets: ["127.0.0.1:10255"]
`
	promApply        = "kubectl apply -f prometheus-rbac.yaml"
	promToken        = "kubectl -n monitoring create token prometheus --duration 8760h > prometheus.token"
	promReadOnlyPort = "echo 'readOnlyPort: 10255' >> /var/lib/kubelet/config.yaml"
	promRestart      = "systemctl restart kubelet"
	promRun          = "prometheus --config.file=prometheus.yml --storage.tsdb.path=prometheus-data --web.listen-address=127.0.0.1:9090"
	promQueryUp      = "curl -s 'http://127.0.0.1:9090/api/v1/query?query=up'"
	promQuerySeries  = "curl -s 'http://127.0.0.1:9090/api/v1/query?query=container_memory_working_set_bytes%7Bpod%3D%22kube-apiserver-cp1%22%7D'"
)

// promFiles are the guide's files, by the name its yaml block gives, as
// the test writes them in root's home on cp1.
var promFiles = map[string]string{"prometheus-rbac.yaml": promRBAC, "prometheus.yml": promConfig}

// promCommands are the guide's commands, in its order.
var promCommands = []string{promApply, promToken, promReadOnlyPort, promRestart, promRun, promQueryUp, promQuerySeries}
