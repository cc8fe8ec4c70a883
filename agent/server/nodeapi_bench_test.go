package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
)

// manyPods is an agent with n pods of two containers each, every one with
// its status, stats and probe counts, as a busy node's would be.
type manyPods struct {
	fakeAgent
	sum    *podspec.Summary
	counts map[prober.CountKey]uint64
}

func newManyPods(n int) *manyPods {
	m := &manyPods{sum: &podspec.Summary{Node: podspec.NodeStats{Time: time.Now(), MemoryCapacity: 8 << 30}}, counts: map[prober.CountKey]uint64{}}
	for i := range n {
		name, uid := fmt.Sprintf("pod-%03d-node1", i), fmt.Sprintf("uid-%03d", i)
		pod := v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID(uid),
				Annotations: map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": uid}},
			Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
		}
		ps := podspec.PodStats{UID: uid, Namespace: "kube-system", Name: name, Usage: podspec.Usage{CPUUsageNanos: 1e9, MemoryWorkingSet: 1 << 20, Pids: 2}}
		for _, c := range []string{"main", "sidecar"} {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c, Image: "registry.k8s.io/etcd:3.6.0-0",
				Command:        []string{"etcd", "--data-dir=/var/lib/etcd", "--listen-client-urls=https://127.0.0.1:2379"},
				Resources:      v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi"), v1.ResourceCPU: resource.MustParse("1")}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/readyz"}}}})
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{Name: c, Ready: true, Image: "registry.k8s.io/etcd:3.6.0-0",
				ContainerID: "staticpodd://" + uid + c, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}})
			ps.Containers = append(ps.Containers, podspec.ContainerStats{ID: uid + c, Name: c, Usage: ps.Usage, RootfsBytes: 4096, LogsBytes: 1024})
			for _, r := range []prober.Result{prober.Success, prober.Failure} {
				m.counts[prober.CountKey{Namespace: "kube-system", Pod: name, UID: uid, Container: c, Probe: prober.Readiness, Result: r}] = 100
			}
		}
		m.pods = append(m.pods, pod)
		m.sum.Pods = append(m.sum.Pods, ps)
	}
	return m
}

func (m *manyPods) NodeName() string { return "node1" }
func (m *manyPods) StatsSummary(context.Context) (*podspec.Summary, error) {
	return m.sum, nil
}
func (m *manyPods) PressureConditions() []v1.NodeCondition  { return nil }
func (m *manyPods) ProbeCounts() map[prober.CountKey]uint64 { return m.counts }

// BenchmarkNodeAPI measures a request to each of the node API's bulk
// endpoints with 10 and 100 pods, over TLS with a client certificate on a
// kept-alive connection (a scraper's), on loopback: the difference between
// the two is the cost of a pod. The agent is in memory: the runtime's own
// cost of reading cgroups is not in these figures.
func BenchmarkNodeAPI(b *testing.B) {
	for _, n := range []int{10, 100} {
		a := newManyPods(n)
		c := newCA(b, "ca")
		pki := filepath.Join(b.TempDir(), "pki")
		tc, err := TLS{PKIDir: pki, Host: "node1", RequestClientCerts: true}.Config()
		if err != nil {
			b.Fatal(err)
		}
		pemBytes, _ := os.ReadFile(filepath.Join(pki, "kubelet.crt"))
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		h := Node(a, NodeConfig{Auth: &Auth{ClientCAs: StaticCAs(c.pool)}, Metrics: NewMetrics(a)}, logger())
		ctx, cancel := context.WithCancel(context.Background())
		go ServeTLS(ctx, l, h, tc, DefaultLimits(8), logger())
		cl := tlsClient(poolOf(pemBytes), c.client(b, "scraper"))
		for _, path := range []string{"/pods", "/stats/summary", "/metrics", "/metrics/cadvisor", "/metrics/probes"} {
			b.Run(fmt.Sprintf("%s/pods=%d", path[1:], n), func(b *testing.B) {
				b.ReportAllocs()
				size := 0
				for b.Loop() {
					resp, err := cl.Get("https://" + l.Addr().String() + path)
					if err != nil {
						b.Fatal(err)
					}
					nb, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("%s = %d", path, resp.StatusCode)
					}
					size = int(nb)
				}
				b.ReportMetric(float64(size), "bytes/resp")
			})
		}
		cancel()
		cl.CloseIdleConnections()
	}
}

func poolOf(pemBytes []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemBytes)
	return p
}
