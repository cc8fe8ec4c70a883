package image

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A manifest the registry redirects to another host (or path) is bounded
// as one it serves itself: the bound is by what was asked for, not by the
// path of the last hop.
func TestPullRedirectedManifestBounded(t *testing.T) {
	for _, withLength := range []bool{true, false} {
		t.Run(fmt.Sprintf("length=%v", withLength), func(t *testing.T) {
			big := []byte(`{"schemaVersion":2,"x":"` + strings.Repeat("a", maxManifestSize) + `"}`)
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				if withLength {
					w.Header().Set("Content-Length", fmt.Sprint(len(big)))
				}
				w.Write(big)
			}))
			t.Cleanup(other.Close)
			reg := newTestRegistry(t, false)
			f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
				if strings.Contains(req.URL.Path, "/manifests/") {
					http.Redirect(w, req, other.URL+"/somewhere/else", http.StatusTemporaryRedirect)
					return
				}
				next.ServeHTTP(w, req)
			}
			reg.wrap.Store(&f)
			hosts := t.TempDir()
			writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
			p := NewPuller(openStore(t), PullConfig{HostsDir: hosts}, discardLogger())
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := p.Pull(ctx, reg.host+"/team/big:v1", nil)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d", maxManifestSize)) {
				t.Fatalf("err = %v, want the manifest's size bound", err)
			}
		})
	}
}
