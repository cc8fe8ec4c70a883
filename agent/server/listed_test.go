package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// listingAgent lists its pods once listed is closed, as a daemon just
// started does.
type listingAgent struct {
	fakeAgent
	listed chan struct{}
}

func (l listingAgent) Listed() <-chan struct{} { return l.listed }

// The command line's /pods waits for a daemon just started to list its
// pods, answers at once after, answers what it has once listWaitMax has
// passed, and a client that leaves meanwhile is answered nothing.
func TestCLIWaitsForTheFirstListing(t *testing.T) {
	a := listingAgent{fakeAgent{pods: []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default"}}}}, make(chan struct{})}
	srv := httptest.NewServer(CLI(a, logger()))
	defer srv.Close()
	get := func(ctx context.Context) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/pods", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var list v1.PodList
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}

	// A client that gives up while the daemon lists.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	if n, err := get(ctx); err == nil {
		t.Errorf("answered %d pods before the daemon listed them", n)
	}
	cancel()

	// One that waits: answered once listed.
	got := make(chan int, 1)
	go func() {
		n, err := get(t.Context())
		if err != nil {
			t.Error(err)
		}
		got <- n
	}()
	close(a.listed)
	if n := <-got; n != 1 {
		t.Errorf("%d pods once listed, want 1", n)
	}

	// A daemon that never lists answers after listWaitMax.
	old := listWaitMax
	listWaitMax = 50 * time.Millisecond
	defer func() { listWaitMax = old }()
	stuck := listingAgent{a.fakeAgent, make(chan struct{})}
	srv2 := httptest.NewServer(CLI(stuck, logger()))
	defer srv2.Close()
	resp, err := http.Get(srv2.URL + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d from a daemon that never lists, want its answer after the wait", resp.StatusCode)
	}
}

// The wait is for a daemon just started: once listWaitMax has passed since
// the socket began to serve, a daemon that has still not listed its pods
// (one run before kubeadm wrote its configuration, whose sources never
// speak; a pod whose first sync is stuck) answers every request at once,
// rather than each after listWaitMax, for as long as it runs.
func TestCLIWaitsOnlyWhileTheDaemonStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := listingAgent{fakeAgent{pods: []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default"}}}}, make(chan struct{})}
		h := CLI(stuck, logger())
		ask := func() *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/pods", nil))
			}()
			synctest.Wait()
			select {
			case <-done:
				return rec
			default:
			}
			<-done // after listWaitMax, on the bubble's clock
			return nil
		}
		if ask() != nil {
			t.Fatal("a daemon just started answered before it listed its pods")
		}
		// listWaitMax has passed since the first request, made as the
		// socket began to serve: no request waits any more.
		for i := range 3 {
			rec := ask()
			if rec == nil {
				t.Fatalf("request %d waited listWaitMax again, %s after the daemon started", i+2, listWaitMax)
			}
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), "web-node1") {
				t.Fatalf("request %d: %d %s", i+2, rec.Code, rec.Body)
			}
		}
	})
}
