package tests

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// nodeMetrics reads counters of the daemon's from the node API's /metrics.
// A test that says something did not happen waits for the counter of what
// could have made it happen to move (pod syncs, URL requests), rather than
// sleeping on the wall clock.
type nodeMetrics struct {
	t      *testing.T
	d      *daemon
	ca     *testCA
	client *http.Client // made at the first read: the daemon writes its certificate at start
}

// newNodeMetrics lets a client certificate read d's node API; call it
// before d starts.
func newNodeMetrics(t *testing.T, d *daemon) *nodeMetrics {
	t.Helper()
	ca := newTestCA(t, d.Dir, "node-metrics-ca")
	f, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "authentication: {x509: {clientCAFile: %s}}\nauthorization: {mode: AlwaysAllow}\n", ca.file)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return &nodeMetrics{t: t, d: d, ca: ca}
}

func (m *nodeMetrics) read() (map[string]*dto.MetricFamily, error) {
	if m.client == nil {
		m.client = nodeClient(m.t, m.d, "", m.ca.issue(m.t, "node-metrics", "system:masters"))
	}
	code, body, err := fetch(m.client, fmt.Sprintf("https://127.0.0.1:%d/metrics", m.d.NodePort))
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d %v", code, err)
	}
	return parseMetrics(m.t, "/metrics", body), nil
}

// podSyncs is how many pod syncs the daemon has made:
// kubelet_pod_worker_duration_seconds' sample count over its operation types.
func podSyncs(fams map[string]*dto.MetricFamily) float64 {
	n := uint64(0)
	for _, m := range fams["kubelet_pod_worker_duration_seconds"].GetMetric() {
		n += m.Histogram.GetSampleCount()
	}
	return float64(n)
}

// failedURLRequests is how many requests to the manifest URL failed.
func failedURLRequests(fams map[string]*dto.MetricFamily) float64 {
	return metricValue(fams, "staticpodd_manifest_url_requests_total", map[string]string{"result": "failure"})
}

// await waits until counter moved by n from now. still, checked at each
// poll, says what must not happen meanwhile: its error fails the test at
// once (a pod that is stopped has no syncs left to count).
//
// With one pod, podSyncs moving by 2 means at least one sync of it began
// after the call: whatever the daemon had been told before, its worker has
// acted on it.
func (m *nodeMetrics) await(what string, counter func(map[string]*dto.MetricFamily) float64, n float64, timeout time.Duration, still func() error) {
	m.t.Helper()
	var from float64
	m.d.Eventually(10*time.Second, "the node API's /metrics", func() error {
		fams, err := m.read()
		if err == nil {
			from = counter(fams)
		}
		return err
	})
	m.d.Eventually(timeout, fmt.Sprintf("%v more %s", n, what), func() error {
		if err := still(); err != nil {
			m.t.Fatal(err)
		}
		fams, err := m.read()
		if err != nil {
			return err
		}
		if now := counter(fams); now < from+n {
			return fmt.Errorf("%v %s since, want %v", now-from, what, n)
		}
		return nil
	})
}
