package tests

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"
)

// syncCounter reads how many pod syncs the daemon has made:
// kubelet_pod_worker_duration_seconds' sample count over its operation
// types, from the node API's /metrics. A test that says a pod was left alone
// waits for this count to move, so that the syncs that could have disturbed
// the pod have run, rather than sleeping on the wall clock.
type syncCounter struct {
	t      *testing.T
	d      *daemon
	ca     *testCA
	client *http.Client // made at the first read: the daemon writes its certificate at start
}

// newSyncCounter lets a client certificate read d's node API; call it before
// d starts.
func newSyncCounter(t *testing.T, d *daemon) *syncCounter {
	t.Helper()
	ca := newTestCA(t, d.Dir, "sync-counter-ca")
	f, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "authentication: {x509: {clientCAFile: %s}}\nauthorization: {mode: AlwaysAllow}\n", ca.file)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return &syncCounter{t: t, d: d, ca: ca}
}

// count is the number of pod syncs so far.
func (s *syncCounter) count() (uint64, error) {
	if s.client == nil {
		s.client = nodeClient(s.t, s.d, "", s.ca.issue(s.t, "sync-counter", "system:masters"))
	}
	code, body, err := fetch(s.client, fmt.Sprintf("https://127.0.0.1:%d/metrics", s.d.NodePort))
	if err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d %v", code, err)
	}
	n := uint64(0)
	for _, m := range parseMetrics(s.t, "/metrics", body)["kubelet_pod_worker_duration_seconds"].GetMetric() {
		n += m.Histogram.GetSampleCount()
	}
	return n, nil
}

// await waits until n more pod syncs than now have completed. With one pod,
// n = 2 means at least one sync of it began after the call: whatever the
// daemon had been told before, its worker has acted on it. still, checked
// at each poll, says what must not happen meanwhile: its error fails the
// test at once (a pod that is stopped has no syncs left to count).
func (s *syncCounter) await(n uint64, timeout time.Duration, still func() error) {
	s.t.Helper()
	var from uint64
	s.d.Eventually(10*time.Second, "the node API's /metrics", func() (err error) {
		from, err = s.count()
		return err
	})
	s.d.Eventually(timeout, fmt.Sprintf("%d more pod syncs", n), func() error {
		if err := still(); err != nil {
			s.t.Fatal(err)
		}
		now, err := s.count()
		if err != nil {
			return err
		}
		if now < from+n {
			return fmt.Errorf("%d pod syncs since, want %d", now-from, n)
		}
		return nil
	})
}
