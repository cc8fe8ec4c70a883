package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// copyCounting is an agent that counts the calls of Pods, each of which
// copies every pod with its status in the agent.
type copyCounting struct {
	*manyPods
	copies *atomic.Int32
}

func (c copyCounting) Pods() []v1.Pod {
	c.copies.Add(1)
	return c.manyPods.Pods()
}

// A scrape of each metrics endpoint reads the pods without a copy of them
// (PodFigures), and still shows them.
func TestScrapeCopiesNoPod(t *testing.T) {
	a := copyCounting{newManyPods(3), new(atomic.Int32)}
	h := ReadOnly(a, NewMetrics(a), logger())
	want := map[string]string{
		"/metrics":          `staticpodd_pod_ready{namespace="kube-system",pod="pod-002-node1",uid="uid-002"} 1`,
		"/metrics/cadvisor": `container_spec_cpu_quota{container="sidecar",id="uid-002sidecar",image="registry.k8s.io/etcd:3.6.0-0"`,
		"/metrics/resource": `container_start_time_seconds{container="main",namespace="kube-system",pod="pod-001-node1"}`,
		"/metrics/probes":   `prober_probe_total{container="main",namespace="kube-system",pod="pod-000-node1",pod_uid="uid-000",probe_type="Readiness",result="failed"} 100`,
	}
	for path, line := range want {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), line) {
			t.Errorf("GET %s = %d, without %s:\n%s", path, rec.Code, line, rec.Body)
		}
	}
	if n := a.copies.Load(); n != 0 {
		t.Errorf("the scrapes copied the pods %d times, want none", n)
	}
}
