package main

import (
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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
	mux.HandleFunc("/list", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: cfg}}\n"))
	})
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

	out, err = execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", "--manifest-url-ca", ca, srv.URL+"/list")
	if err != nil || !strings.Contains(out, "ok: "+srv.URL+"/list: ConfigMap default/cfg\n") {
		t.Errorf("a List of a ConfigMap: %v\n%s", err, out)
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

	// -o json: one object per URL, before the files, each with its pods or
	// its errors (field, value, reason).
	file := filepath.Join(t.TempDir(), "pod.yaml")
	os.WriteFile(file, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: f}\nspec:\n  containers: [{name: c, image: busybox}]\n"), 0o644)
	out, err = execute(t, testRoot(validateCmd), "validate", "--hostname-override", "node1", "-o", "json",
		"--manifest-url-header", "Authorization:Bearer sesame", "--manifest-url-ca", ca,
		srv.URL+"/good", srv.URL+"/bad", srv.URL+"/empty", srv.URL+"/dup", file)
	if err == nil {
		t.Error("validate -o json passed bad URLs")
	}
	var got []checked
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(got) != 5 {
		t.Fatalf("-o json entries:\n%s", out)
	}
	good, bad, empty, dup, f := got[0], got[1], got[2], got[3], got[4]
	if good.Source != "http" || good.Origin != srv.URL+"/good" || len(good.Pods) != 2 || good.Pods[1].Name != "b-node1" || len(good.Errors) != 0 {
		t.Errorf("good URL: %+v", good)
	}
	if len(bad.Pods) != 0 || len(bad.Errors) != 1 || bad.Errors[0].Field != "items[0].spec.containers[0].image" || bad.Errors[0].Reason != "Required value" {
		t.Errorf("bad URL: %+v", bad)
	}
	if len(empty.Pods) != 0 || len(empty.Errors) != 1 || !strings.HasPrefix(empty.Errors[0].Reason, "empty body") {
		t.Errorf("empty URL: %+v", empty)
	}
	if len(dup.Pods) != 1 || len(dup.Errors) != 1 || dup.Errors[0].Field != "items[1]" {
		t.Errorf("dup URL: %+v", dup)
	}
	if f.Source != "file" || f.Origin != file || len(f.Pods) != 1 {
		t.Errorf("file: %+v", f)
	}
	out, _ = execute(t, testRoot(validateCmd), "validate", "-o", "json", "http://127.0.0.1:1/pods")
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 || !strings.Contains(got[0].Errors[0].Reason, "connection refused") {
		t.Errorf("-o json of a URL that does not answer: %v\n%s", err, out)
	}

	// Without the CA, as the daemon without --manifest-url-ca.
	out, _ = execute(t, testRoot(validateCmd), "validate", srv.URL+"/good")
	if !strings.Contains(out, "certificate signed by unknown authority") {
		t.Errorf("without the CA:\n%s", out)
	}
}

// validate --manifest-url-header sends the header to the URL's origin only,
// as the daemon: a 302 to another host, over http and over https, is followed
// without it, and a redirect within the origin keeps it.
func TestValidateURLHeaderStaysWithItsOrigin(t *testing.T) {
	for _, tc := range []struct {
		name         string
		tls          bool
		secondListen string
	}{
		{"http", false, "127.0.0.2:0"},
		{"https", true, "[::1]:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var leaked, heard, served atomic.Int64
			second := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Api-Key") != "" {
					leaked.Add(1)
				}
				served.Add(1)
				w.Write([]byte(urlPodList))
			}))
			l, err := net.Listen("tcp", tc.secondListen)
			if err != nil {
				t.Fatal(err)
			}
			second.Listener.Close()
			second.Listener = l
			mux := http.NewServeMux()
			mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, second.URL+"/pods", http.StatusFound)
			})
			mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/pods", http.StatusFound)
			})
			mux.HandleFunc("/pods", func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Api-Key") == "sesame" {
					heard.Add(1)
				}
				w.Write([]byte(urlPodList))
			})
			first := httptest.NewUnstartedServer(mux)
			args := []string{"validate", "--hostname-override", "node1", "--manifest-url-header", "X-Api-Key:sesame"}
			if tc.tls {
				second.StartTLS()
				first.StartTLS()
				ca := filepath.Join(t.TempDir(), "ca.pem")
				os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: first.Certificate().Raw}), 0o644)
				args = append(args, "--manifest-url-ca", ca)
			} else {
				second.Start()
				first.Start()
			}
			defer second.Close()
			defer first.Close()

			for _, o := range [][]string{nil, {"-o", "json"}} {
				out, err := execute(t, testRoot(validateCmd), append(append(args, o...), first.URL+"/away", first.URL+"/here")...)
				if err != nil {
					t.Errorf("validate %v: %v\n%s", o, err, out)
				}
			}
			if served.Load() != 2 || leaked.Load() != 0 {
				t.Errorf("the other host served %d requests, %d of them with the header; want 2 and none", served.Load(), leaked.Load())
			}
			if heard.Load() != 2 {
				t.Errorf("a redirect within the origin carried the header %d times of 2", heard.Load())
			}
		})
	}
}
