package hostile

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// A manifest URL's configured header (staticPodURLHeader, an API key) goes
// to the URL's origin only: the daemon and `staticpodd validate
// --manifest-url-header` follow a 302 to another host without it.
func TestHostileURLRedirectKeepsHeader(t *testing.T) {
	t.Parallel()
	var leaked, away, home atomic.Int64
	second := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" {
			leaked.Add(1)
		}
		away.Add(1)
		w.Write([]byte("apiVersion: v1\nkind: PodList\nitems: []\n"))
	}))
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	second.Listener.Close()
	second.Listener = l
	second.Start()
	defer second.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == "sesame" {
			home.Add(1)
		}
		http.Redirect(w, r, second.URL+"/pods", http.StatusFound)
	}))
	defer first.Close()

	d := testdaemon.New(t)
	cfg, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(cfg, "staticPodURL: %s/pods\nhttpCheckFrequency: 200ms\nstaticPodURLHeader: {X-Api-Key: [sesame]}\n", first.URL)
	cfg.Close()
	d.Start()
	d.Eventually(30*time.Second, "the daemon followed the redirect three times", func() error {
		if n := away.Load(); n < 3 {
			return fmt.Errorf("%d requests reached the other host", n)
		}
		return nil
	})
	if leaked.Load() != 0 || home.Load() < 3 {
		t.Errorf("the daemon sent the header to the other host %d times of %d, and to its own %d times", leaked.Load(), away.Load(), home.Load())
	}

	before := away.Load()
	out, err := exec.Command(testdaemon.Bin, "validate", "--hostname-override", "node1",
		"--manifest-url-header", "X-Api-Key:sesame", first.URL+"/pods").CombinedOutput()
	if err != nil {
		t.Errorf("validate: %v\n%s", err, out)
	}
	if away.Load() == before || leaked.Load() != 0 {
		t.Errorf("validate: the other host got %d requests, %d of all with the header; want some, none with it\n%s",
			away.Load()-before, leaked.Load(), out)
	}
}
