package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// nodeAPIRequests is how many requests of each endpoint are timed.
const nodeAPIRequests = 50

// benchNodeAPI measures the node API of a real daemon running n sleeping
// pods for each n of counts: per endpoint, the latency of a GET on a
// kept-alive TLS connection with a client certificate (median of
// nodeAPIRequests), and the daemon's CPU time and allocations per request
// (its own go_memstats_mallocs_total, read from /metrics before and after).
// Unlike make bench-nodeapi, /stats/summary and /metrics/cadvisor read the
// pods' real cgroups here.
func benchNodeAPI(bin, image, counts string) error {
	var ns []int
	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-nodeapi-pods %q: %q is not a pod count", counts, f)
		}
		ns = append(ns, n)
	}
	dir, err := os.MkdirTemp("", "staticpodd-bench-nodeapi-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	caFile, cert, err := benchCA(dir)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	d, err := startDaemonConfig(bin, image, dir, fmt.Sprintf("port: %d\nauthentication: {x509: {clientCAFile: %s}}\nauthorization: {mode: AlwaysAllow}\n", port, caFile))
	if err != nil {
		return err
	}
	pd := &probeDaemon{d}
	defer pd.stop()
	cl := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}, // the daemon's self-signed certificate
	}}
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	if err := poll(30*time.Second, func() bool { resp, err := cl.Get(base + "/healthz"); return err == nil && resp.Body.Close() == nil }); err != nil {
		return fmt.Errorf("node API: %v\n%s", err, d.logs.String())
	}
	paths := []string{"/pods", "/stats/summary", "/metrics", "/metrics/cadvisor", "/metrics/resource"}
	type result struct {
		p50          time.Duration
		cpu, mallocs float64
		size         int
	}
	results := map[int]map[string]result{}
	for _, n := range ns {
		for i := range n {
			m := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: sleep%d}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`, i)
			tmp := filepath.Join(dir, "tmp.yaml")
			os.WriteFile(tmp, []byte(m), 0o644)
			os.Rename(tmp, filepath.Join(d.manifests, fmt.Sprintf("sleep%d.yaml", i)))
		}
		if err := poll(5*time.Minute, func() bool { return runningPods(pd) == n }); err != nil {
			return fmt.Errorf("%d of %d pods running: %v", runningPods(pd), n, err)
		}
		results[n] = map[string]result{}
		for _, path := range paths {
			get := func() (int, error) {
				resp, err := cl.Get(base + path)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					return 0, fmt.Errorf("%s: %d", path, resp.StatusCode)
				}
				return len(b), err
			}
			if _, err := get(); err != nil { // warm the connection
				return err
			}
			m0, err := mallocs(cl, base)
			if err != nil {
				return err
			}
			c0 := cpuTime(d.cmd.Process.Pid)
			var took []time.Duration
			size := 0
			for range nodeAPIRequests {
				start := time.Now()
				if size, err = get(); err != nil {
					return err
				}
				took = append(took, time.Since(start))
			}
			c1 := cpuTime(d.cmd.Process.Pid)
			m1, err := mallocs(cl, base)
			if err != nil {
				return err
			}
			slices.Sort(took)
			results[n][path] = result{p50: took[len(took)/2], cpu: float64(c1-c0) / nodeAPIRequests, mallocs: (m1 - m0) / nodeAPIRequests, size: size}
		}
	}
	fmt.Printf("\nnode API of a real daemon, GET over kept-alive TLS with a client certificate, %d requests each (median latency; daemon CPU and allocations per request):\n\n", nodeAPIRequests)
	fmt.Printf("| endpoint | pods | p50 | daemon CPU | daemon allocs | response |\n|---|---|---|---|---|---|\n")
	for _, path := range paths {
		for _, n := range ns {
			r := results[n][path]
			fmt.Printf("| `%s` | %d | %s | %.2f ms | %.0f | %d KB |\n", path, n, ms(r.p50), r.cpu/1e6, r.mallocs, r.size/1000)
		}
	}
	return nil
}

func runningPods(d *probeDaemon) int {
	pods, _ := d.pods()
	n := 0
	for _, p := range pods {
		if p.Status.Phase == "Running" {
			n++
		}
	}
	return n
}

// mallocs is the daemon's go_memstats_mallocs_total.
func mallocs(cl *http.Client, base string) (float64, error) {
	resp, err := cl.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	f := fams["go_memstats_mallocs_total"]
	if f == nil || len(f.Metric) == 0 {
		return 0, fmt.Errorf("/metrics has no go_memstats_mallocs_total")
	}
	return f.Metric[0].GetCounter().GetValue(), nil
}

// benchCA writes a client CA to dir and returns its file and a client
// certificate it signed.
func benchCA(dir string) (string, tls.Certificate, error) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "scraper"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", tls.Certificate{}, err
	}
	file := filepath.Join(dir, "client-ca.crt")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return "", tls.Certificate{}, err
	}
	return file, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
