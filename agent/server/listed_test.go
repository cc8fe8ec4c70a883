package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
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
