package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const urlPodList = `apiVersion: v1
kind: PodList
items:
- metadata: {name: a}
  spec:
    containers: [{name: c, image: busybox}]
- metadata: {name: b}
  spec:
    containers: [{name: c, image: busybox}]
`

// validate URL fetches as the daemon does, headers and private CA included,
// and judges a list whole.
func TestValidateURL(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/good", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sesame" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(urlPodList))
	})
	mux.HandleFunc("/bad", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Replace(urlPodList, "{name: c, image: busybox}]\n-", "{name: c}]\n-", 1)))
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/dup", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Replace(urlPodList, "{name: b}", "{name: a}", 1)))
	})
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)

	out, err := execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1",
		"--manifest-url-header", "Authorization:Bearer sesame", "--manifest-url-ca", ca, srv.URL+"/good")
	if err != nil || !strings.Contains(out, "ok: "+srv.URL+"/good: pod default/a-node1, uid ") ||
		!strings.Contains(out, "pod default/b-node1") || !strings.HasSuffix(out, "1 URL(s), 2 pod(s), 0 error(s)\n") {
		t.Errorf("a good list: %v\n%s", err, out)
	}

	out, err = execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1",
		"--manifest-url-ca", ca, srv.URL+"/good", srv.URL+"/bad", srv.URL+"/empty", srv.URL+"/dup")
	for _, want := range []string{
		"error: " + srv.URL + "/good: HTTP 401 Unauthorized",
		"error: " + srv.URL + "/bad: items[0].spec.containers[0].image: Required value",
		"note: " + srv.URL + "/bad: the daemon takes none of its pods",
		"error: " + srv.URL + "/empty: empty body",
		"error: " + srv.URL + "/dup: items[1]: pod default/a-node1 is items[0] too",
		"ok: " + srv.URL + "/dup: pod default/a-node1",
		"4 URL(s), 1 pod(s), 4 error(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if err == nil {
		t.Error("validate passed bad URLs")
	}

	// Without the CA, as the daemon without --manifest-url-ca.
	out, _ = execute(t, testRoot(validateCmd), "validate", srv.URL+"/good")
	if !strings.Contains(out, "certificate signed by unknown authority") {
		t.Errorf("without the CA:\n%s", out)
	}
}
