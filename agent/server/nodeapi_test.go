package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
)

// ca is a test certificate authority that issues client certificates.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t testing.TB, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &ca{cert: cert, key: key, pool: pool}
}

// client issues a client certificate for user in groups.
func (c *ca) client(t testing.TB, user string, groups ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// fakeAPIServer answers TokenReviews and SubjectAccessReviews as a test
// wants, and counts them. (tests/ and agent/mirror ask a real HTTP server.)
type fakeAPIServer struct {
	mu      sync.Mutex
	tokens  map[string]authenticationv1.UserInfo
	allow   func(authorizationv1.SubjectAccessReviewSpec) bool
	reviews int
	asked   []authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeAPIServer) ReviewToken(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reviews++
	u, ok := f.tokens[token]
	return u, ok, nil
}

func (f *fakeAPIServer) ReviewAccess(ctx context.Context, s authorizationv1.SubjectAccessReviewSpec) (bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, s)
	return f.allow(s), "", nil
}

// nodeAgent measures and counts probes, as *agent.Agent does.
type nodeAgent struct{ fakeAgent }

func (nodeAgent) NodeName() string { return "node1" }
func (nodeAgent) StatsSummary(context.Context) (*podspec.Summary, error) {
	now := time.Now()
	return &podspec.Summary{
		Node: podspec.NodeStats{Time: now, MemoryCapacity: 8 << 30, MemoryWorkingSet: 1 << 30, MemoryUsage: 2 << 30, CPUUsageNanos: 5e9,
			Network: []podspec.InterfaceStats{{Name: "ens3", RxBytes: 10, TxBytes: 20}}},
		Pods: []podspec.PodStats{{UID: "u1", Namespace: "default", Name: "web-node1", Usage: podspec.Usage{CPUUsageNanos: 3e9, MemoryWorkingSet: 5 << 20, Pids: 2},
			Network:    []podspec.InterfaceStats{{Name: "eth0", RxBytes: 100, RxErrors: 1, TxBytes: 200, TxErrors: 2}, {Name: "net1", RxBytes: 7}},
			Containers: []podspec.ContainerStats{{ID: "c1", Name: "web", Usage: podspec.Usage{CPUUsageNanos: 2.5e9, MemoryWorkingSet: 4 << 20, Pids: 1}, RootfsBytes: 4096}}}},
	}, nil
}
func (nodeAgent) PressureConditions() []v1.NodeCondition { return nil }
func (nodeAgent) Evictions() map[string]uint64           { return map[string]uint64{"memory.available": 3} }
func (nodeAgent) ProbeCounts() map[prober.CountKey]uint64 {
	return map[prober.CountKey]uint64{
		{Namespace: "default", Pod: "web-node1", UID: "u1", Container: "web", Probe: prober.Readiness, Result: prober.Success}: 7,
		{Namespace: "default", Pod: "web-node1", UID: "u1", Container: "web", Probe: prober.Readiness, Result: prober.Failure}: 1,
	}
}

func testNodeAgent(t *testing.T) nodeAgent {
	a := testAgent
	a.pods = append([]v1.Pod(nil), a.pods...)
	a.pods[0].Spec.Containers = []v1.Container{{Name: "web", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi"), v1.ResourceCPU: resource.MustParse("500m")}}}}
	a.logFile = rotatedRun(t)
	return nodeAgent{a}
}

// nodeServer serves the node API on loopback with a self-signed serving
// certificate under a temporary root dir; it returns the address and the
// pool that trusts the serving certificate.
func nodeServer(t *testing.T, a MetricsAgent, auth *Auth, hostLogs string, lim Limits) (string, *x509.CertPool) {
	t.Helper()
	pki := filepath.Join(t.TempDir(), "pki")
	tc, err := TLS{PKIDir: pki, Host: "node1", RequestClientCerts: auth.ClientCAs != nil}.Config()
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's names, the key private.
	fi, err := os.Stat(filepath.Join(pki, "kubelet.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("self-signed key: %v, mode %v", err, fi.Mode())
	}
	pemBytes, err := os.ReadFile(filepath.Join(pki, "kubelet.crt"))
	if err != nil {
		t.Fatal(err)
	}
	serving := x509.NewCertPool()
	serving.AppendCertsFromPEM(pemBytes)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := Node(a, NodeConfig{Auth: auth, Metrics: NewMetrics(a), HostLogDir: hostLogs,
		Configz: func() any { return map[string]string{"port": "10250"} }}, logger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeTLS(ctx, l, h, tc, lim, logger()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeTLS: %v", err)
		}
	})
	return l.Addr().String(), serving
}

func tlsClient(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: patience, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, ServerName: "node1"},
	}}
}

// nodePaths is every path the node API answers, for the tests that no
// request gets anything without credentials.
var nodePaths = []string{
	"/healthz", "/healthz?verbose", "/healthz/ping", "/pods", "/stats/summary", "/metrics", "/metrics/cadvisor", "/metrics/probes", "/metrics/resource",
	"/containerLogs/default/web-node1/main", "/containerLogs/default/web-node1/main?follow=true",
	"/logs/", "/logs/a.log", "/configz", "/exec/default/web-node1/web", "/attach/default/web-node1/web",
	"/portForward/default/web-node1", "/run/default/web-node1/web", "/runningpods/", "/nothing",
}

func TestNodeAPIRefusesWithoutCredentials(t *testing.T) {
	good, other := newCA(t, "cluster-ca"), newCA(t, "other-ca")
	api := &fakeAPIServer{tokens: map[string]authenticationv1.UserInfo{"good": {Username: "admin"}, "fresh": {Username: "admin"}}, allow: func(authorizationv1.SubjectAccessReviewSpec) bool { return true }}
	auth := &Auth{ClientCAs: StaticCAs(good.pool), Tokens: api, TokenTTL: time.Minute, Access: api, NodeName: "node1"}
	addr, serving := nodeServer(t, testNodeAgent(t), auth, t.TempDir(), DefaultLimits(8))

	none := tlsClient(serving)
	for _, p := range nodePaths {
		if code, _, body := get(t, none, "https://"+addr+p); code != http.StatusUnauthorized {
			t.Errorf("no credentials: GET %s = %d %q, want 401", p, code, body)
		}
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			req, _ := http.NewRequest(m, "https://"+addr+p, nil)
			resp, err := none.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("no credentials: %s %s = %d, want 401", m, p, resp.StatusCode)
			}
		}
	}
	// A certificate from another CA is refused (401), alone or with a
	// token the API server rejects; a valid token beside it is heard, as
	// the kubelet's union of authenticators does.
	otherCert := other.client(t, "admin", "system:masters")
	withOther := tlsClient(serving, otherCert)
	for token, want := range map[string]int{"": 401, "bad": 401, "good": 200} {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/pods", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := withOther.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("certificate of another CA, token %q: /pods = %d, want %d", token, resp.StatusCode, want)
		}
	}
	// A token the API server rejects, or a scheme that is not Bearer.
	for _, h := range []string{"Bearer bad", "Bearer ", "Basic YWRtaW46YWRtaW4=", "bearer good", "Bearergood"} {
		for _, p := range nodePaths {
			req, _ := http.NewRequest(http.MethodGet, "https://"+addr+p, nil)
			req.Header.Set("Authorization", h)
			resp, err := none.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("Authorization %q: GET %s = %d, want 401", h, p, resp.StatusCode)
			}
		}
	}
	// The good token gets in; its review is cached (one review for many
	// requests), as the rejected one's is.
	api.mu.Lock()
	before := api.reviews
	api.mu.Unlock()
	for range 5 {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/pods", nil)
		req.Header.Set("Authorization", "Bearer fresh")
		resp, err := none.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("good token: /pods = %d", resp.StatusCode)
		}
	}
	api.mu.Lock()
	if n := api.reviews - before; n != 1 {
		t.Errorf("5 requests with one token made %d TokenReviews, want 1 (cacheTTL)", n)
	}
	api.mu.Unlock()
	// Plain HTTP on the TLS port gets nothing.
	if resp, err := http.Get("http://" + addr + "/pods"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "PodList") {
			t.Error("plain HTTP got /pods")
		}
	}
}

// The read-only port serves /stats/summary, as the kubelet's does, with no
// credentials: the node e2e suite's eviction tests read the node's
// filesystem there.
func TestReadOnlyStatsSummary(t *testing.T) {
	h := httptest.NewServer(ReadOnly(testNodeAgent(t), nil, logger()))
	defer h.Close()
	code, _, body := get(t, h.Client(), h.URL+"/stats/summary")
	var sum statsapi.Summary
	if err := json.Unmarshal(body, &sum); code != 200 || err != nil {
		t.Fatalf("/stats/summary = %d, decode: %v\n%s", code, err, body)
	}
	if sum.Node.NodeName != "node1" || len(sum.Pods) != 1 || *sum.Pods[0].CPU.UsageCoreNanoSeconds != 3e9 {
		t.Errorf("summary = %+v", sum)
	}
}

// With a valid client certificate and AlwaysAllow, every endpoint answers
// in the format its consumers read: Prometheus' parser for /metrics*, the
// kubelet's Summary type for /stats/summary.
func TestNodeAPIFormats(t *testing.T) {
	c := newCA(t, "cluster-ca")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.log"), []byte("host log\n"), 0o644)
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{ClientCAs: StaticCAs(c.pool), NodeName: "node1"}, dir, DefaultLimits(8))
	cl := tlsClient(serving, c.client(t, "system:kube-apiserver-kubelet-client", "kubeadm:cluster-admins"))
	base := "https://" + addr

	families := func(path string) map[string]*dto.MetricFamily {
		t.Helper()
		code, _, body := get(t, cl, base+path)
		if code != 200 {
			t.Fatalf("%s = %d %s", path, code, body)
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("%s does not parse: %v\n%s", path, err, body)
		}
		return fams
	}
	type mf = map[string]*dto.MetricFamily
	value := func(fams mf, name string, labels map[string]string) (float64, bool) {
		f := fams[name]
		if f == nil {
			return 0, false
		}
	next:
		for _, m := range f.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			}
		}
		return 0, false
	}
	main := families("/metrics")
	for name, want := range map[string]float64{"kubelet_running_pods": 1} {
		if v, ok := value(main, name, nil); !ok || v != want {
			t.Errorf("/metrics %s = %v (%v), want %v", name, v, ok, want)
		}
	}
	if v, ok := value(main, "kubelet_running_containers", map[string]string{"container_state": "running"}); !ok || v != 1 {
		t.Errorf("kubelet_running_containers{running} = %v %v", v, ok)
	}
	if v, ok := value(main, "staticpodd_container_restarts", map[string]string{"pod": "web-node1", "container": "web"}); !ok || v != 2 {
		t.Errorf("staticpodd_container_restarts = %v %v", v, ok)
	}
	if v, ok := value(main, "staticpodd_manifest_problems", nil); !ok || v != 1 {
		t.Errorf("staticpodd_manifest_problems = %v %v", v, ok)
	}
	if v, ok := value(main, "kubelet_evictions", map[string]string{"eviction_signal": "memory.available"}); !ok || v != 3 {
		t.Errorf("kubelet_evictions = %v %v", v, ok)
	}
	if _, ok := main["process_open_fds"]; !ok {
		t.Error("/metrics has no process metrics")
	}
	// The requests so far are counted, by a bounded set of methods and paths.
	for _, m := range []string{"BREW", "X-" + strings.Repeat("A", 50)} {
		req, _ := http.NewRequest(m, base+"/"+m, nil)
		if resp, err := cl.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	main = families("/metrics")
	if v, ok := value(main, "kubelet_http_requests_total", map[string]string{"path": "other", "method": "other"}); !ok || v != 2 {
		t.Errorf("kubelet_http_requests_total{other} = %v %v, want 2", v, ok)
	}
	if v, ok := value(main, "kubelet_http_requests_total", map[string]string{"path": "metrics", "server_type": "readwrite", "method": "GET"}); !ok || v < 1 {
		t.Errorf("kubelet_http_requests_total{path=metrics} = %v %v", v, ok)
	}

	cad := families("/metrics/cadvisor")
	ctr := map[string]string{"container": "web", "pod": "web-node1", "namespace": "default", "id": "c1"}
	for name, want := range map[string]float64{
		"container_cpu_usage_seconds_total": 2.5, "container_memory_working_set_bytes": 4 << 20,
		"container_spec_memory_limit_bytes": 64 << 20, "container_spec_cpu_quota": 50000, "container_spec_cpu_period": 100000,
		"container_processes": 1, "container_spec_cpu_shares": 512,
	} {
		if v, ok := value(cad, name, ctr); !ok || v != want {
			t.Errorf("/metrics/cadvisor %s{web} = %v (%v), want %v", name, v, ok, want)
		}
	}
	if v, ok := value(cad, "container_memory_working_set_bytes", map[string]string{"id": "/"}); !ok || v != 1<<30 {
		t.Errorf("node working set = %v %v", v, ok)
	}
	if v, ok := value(cad, "container_cpu_usage_seconds_total", map[string]string{"container": "", "pod": "web-node1"}); !ok || v != 3 {
		t.Errorf("pod cpu = %v %v", v, ok)
	}

	res := families("/metrics/resource")
	for name, want := range map[string]float64{"container_cpu_usage_seconds_total": 2.5, "container_memory_working_set_bytes": 4 << 20} {
		if v, ok := value(res, name, map[string]string{"container": "web", "pod": "web-node1", "namespace": "default"}); !ok || v != want {
			t.Errorf("/metrics/resource %s = %v %v, want %v", name, v, ok, want)
		}
	}
	if v, ok := value(res, "pod_cpu_usage_seconds_total", map[string]string{"pod": "web-node1", "namespace": "default"}); !ok || v != 3 {
		t.Errorf("/metrics/resource pod_cpu_usage_seconds_total = %v %v", v, ok)
	}
	if v, ok := value(res, "node_memory_working_set_bytes", nil); !ok || v != 1<<30 {
		t.Errorf("/metrics/resource node_memory_working_set_bytes = %v %v", v, ok)
	}
	if v, ok := value(res, "node_cpu_usage_seconds_total", nil); !ok || v != 5 {
		t.Errorf("/metrics/resource node_cpu_usage_seconds_total = %v %v, want 5", v, ok)
	}

	probes := families("/metrics/probes")
	if v, ok := value(probes, "prober_probe_total", map[string]string{"probe_type": "Readiness", "result": "successful", "pod": "web-node1", "pod_uid": "u1", "container": "web", "namespace": "default"}); !ok || v != 7 {
		t.Errorf("prober_probe_total{successful} = %v %v", v, ok)
	}

	code, _, body := get(t, cl, base+"/stats/summary")
	var sum statsapi.Summary
	if err := json.Unmarshal(body, &sum); code != 200 || err != nil {
		t.Fatalf("/stats/summary = %d, decode: %v", code, err)
	}
	if sum.Node.NodeName != "node1" || len(sum.Pods) != 1 || *sum.Pods[0].CPU.UsageCoreNanoSeconds != 3e9 {
		t.Errorf("summary = %+v", sum)
	}
	// The kubelet's network stats: every interface, and eth0 also on top.
	if n := sum.Pods[0].Network; n == nil || n.Name != "eth0" || *n.RxBytes != 100 || *n.TxErrors != 2 || len(n.Interfaces) != 2 || *n.Interfaces[1].RxBytes != 7 {
		t.Errorf("pod network = %+v", n)
	}
	if n := sum.Node.Network; n == nil || n.Name != "" || len(n.Interfaces) != 1 || n.Interfaces[0].Name != "ens3" || *n.Interfaces[0].TxBytes != 20 {
		t.Errorf("node network = %+v, want ens3 in its interfaces and no default (eth0) one", n)
	}
	if c := sum.Node.CPU; c == nil || *c.UsageCoreNanoSeconds != 5e9 {
		t.Errorf("node cpu = %+v", c)
	}

	code, _, body = get(t, cl, base+"/pods")
	var pods v1.PodList
	if err := json.Unmarshal(body, &pods); code != 200 || err != nil || len(pods.Items) != 1 {
		t.Errorf("/pods = %d %v %d pods", code, err, len(pods.Items))
	}
	if code, _, body = get(t, cl, base+"/configz"); code != 200 || !strings.Contains(string(body), `"kubeletconfig":{"port":"10250"}`) {
		t.Errorf("/configz = %d %s", code, body)
	}
	if code, _, body = get(t, cl, base+"/healthz"); code != 200 || string(body) != "ok" {
		t.Errorf("/healthz = %d %s", code, body)
	}
	if code, _, body = get(t, cl, base+"/logs/a.log"); code != 200 || string(body) != "host log\n" {
		t.Errorf("/logs/a.log = %d %q", code, body)
	}
	if code, _, body = get(t, cl, base+"/logs/"); code != 200 || !strings.Contains(string(body), `href="a.log"`) {
		t.Errorf("/logs/ = %d %q", code, body)
	}
	if code, _, body = get(t, cl, base+"/containerLogs/default/web-node1/main?limitBytes=9"); code != 200 || len(body) != 9 {
		t.Errorf("limitBytes=9: %d %q", code, body)
	}
	if code, _, _ = get(t, cl, base+"/exec/default/web-node1/web"); code != http.StatusNotImplemented {
		t.Errorf("/exec = %d, want 501", code)
	}
}

func TestHostLogsTraversal(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("secret"), 0o600)
	root := filepath.Join(t.TempDir(), "log")
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	os.WriteFile(filepath.Join(root, "sub", "ok.log"), []byte("ok\n"), 0o644)
	os.Symlink(secret, filepath.Join(root, "link"))
	os.Symlink(outside, filepath.Join(root, "dirlink"))
	os.Symlink("../..", filepath.Join(root, "sub", "up"))
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCA(t, "ca")
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{ClientCAs: StaticCAs(c.pool)}, root, DefaultLimits(8))
	cl := tlsClient(serving, c.client(t, "admin"))
	if code, _, body := get(t, cl, "https://"+addr+"/logs/sub/ok.log"); code != 200 || string(body) != "ok\n" {
		t.Errorf("/logs/sub/ok.log = %d %q", code, body)
	}
	for _, p := range []string{"link", "dirlink/secret", "sub/up/secret", "fifo", "sub/../../secret", "%2e%2e/secret",
		"sub/%2e%2e/%2e%2e/secret", "..%2fsecret", "sub/..%2f..%2fsecret", "%00", "nothing"} {
		// Sent as written: no client-side cleaning of the path.
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: serving, ServerName: "node1", Certificates: []tls.Certificate{c.client(t, "admin")}})
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(patience))
		fmt.Fprintf(conn, "GET /logs/%s HTTP/1.1\r\nHost: node1\r\nConnection: close\r\n\r\n", p)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("/logs/%s: %v", p, err)
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode == 200 || strings.Contains(string(b), "secret\n") || string(b) == "secret" {
			t.Errorf("/logs/%s = %d %q", p, resp.StatusCode, b)
		}
	}
}

// A client that opens a connection and never finishes its handshake, or
// its headers, is cut at the read-header timeout; oversized headers are
// refused; connections beyond the cap wait.
func TestNodeAPIBounded(t *testing.T) {
	c := newCA(t, "ca")
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{ClientCAs: StaticCAs(c.pool)}, t.TempDir(), short(2))
	for _, what := range []string{"silent", "slow headers"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(patience))
		var rw io.ReadWriter = conn
		if what == "slow headers" {
			tc := tls.Client(conn, &tls.Config{RootCAs: serving, ServerName: "node1"})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			io.WriteString(tc, "GET /pods HTTP/1.1\r\n")
			rw = tc
		}
		start := time.Now()
		_, err = io.ReadAll(rw)
		if time.Since(start) >= patience || (err != nil && strings.Contains(err.Error(), "timeout")) {
			t.Errorf("%s connection not cut by the server: %v", what, err)
		}
		conn.Close()
	}
	cl := tlsClient(serving, c.client(t, "admin"))
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/pods", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
	resp, err := cl.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("oversized headers = %d, want 431", resp.StatusCode)
		}
	}
}

func TestSelfSignedKept(t *testing.T) {
	pki := filepath.Join(t.TempDir(), "pki")
	if _, err := (TLS{PKIDir: pki, Host: "node1"}).Config(); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(pki, "kubelet.crt"))
	if _, err := (TLS{PKIDir: pki, Host: "node1"}).Config(); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(filepath.Join(pki, "kubelet.crt"))
	if string(first) != string(again) {
		t.Error("a second start made a new self-signed certificate")
	}
	blk, _ := pem.Decode(first)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("node1"); err != nil {
		t.Error(err)
	}
	if _, err := (TLS{CertFile: filepath.Join(pki, "kubelet.crt")}).Config(); err == nil {
		t.Error("tlsCertFile without tlsPrivateKeyFile accepted")
	}
}

// A serving certificate and a client CA bundle replaced on disk are used
// from then on, without a restart, as the kubelet reloads them.
func TestNodeAPIReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	writeServing := func(host string) *x509.CertPool {
		certPEM, keyPEM, err := selfSigned(host, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFileSync(keyFile, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := writeFileSync(certFile, certPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		p := x509.NewCertPool()
		p.AppendCertsFromPEM(certPEM)
		return p
	}
	writeCA := func(c *ca) {
		if err := writeFileSync(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw}), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	first, second := newCA(t, "first"), newCA(t, "second")
	oldServing := writeServing("node1")
	writeCA(first)
	cas, err := ClientCAFile(caFile, logger())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := TLS{CertFile: certFile, KeyFile: keyFile, RequestClientCerts: true}.Config()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := testNodeAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ServeTLS(ctx, l, Node(a, NodeConfig{Auth: &Auth{ClientCAs: cas}}, logger()), tc, DefaultLimits(8), logger())
	}()
	defer func() { cancel(); <-done }()
	url := "https://" + l.Addr().String() + "/healthz"
	status := func(roots *x509.CertPool, cert tls.Certificate) int {
		cl := tlsClient(roots, cert)
		cl.Transport.(*http.Transport).DisableKeepAlives = true
		resp, err := cl.Get(url)
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status(oldServing, first.client(t, "a")); got != 200 {
		t.Fatalf("before: %d", got)
	}
	newServing := writeServing("node1")
	writeCA(second)
	deadline := time.Now().Add(patience)
	for status(newServing, second.client(t, "a")) != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the new serving certificate and client CA were not taken")
		}
		time.Sleep(100 * time.Millisecond) // the reload check runs once a second
	}
	if got := status(newServing, first.client(t, "a")); got != 401 {
		t.Errorf("a certificate of the replaced CA: %d, want 401", got)
	}
	if got := status(oldServing, second.client(t, "a")); got != -1 {
		t.Errorf("the old serving certificate is still served: %d", got)
	}
	// A half-written bundle keeps the last good one.
	os.WriteFile(caFile, []byte("-----BEGIN CERT"), 0o644)
	time.Sleep(2 * reloadEvery) // past the next check
	if got := status(newServing, second.client(t, "a")); got != 200 {
		t.Errorf("after a broken bundle: %d, want the last good one kept (200)", got)
	}
}

// Connections beyond the cap wait unanswered: the cap counts handshaken
// connections, so the third finishes its handshake, but its request is read
// only once a served connection closes.
func TestNodeAPIConnectionCap(t *testing.T) {
	c := newCA(t, "ca")
	lim := DefaultLimits(2)
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{ClientCAs: StaticCAs(c.pool)}, t.TempDir(), lim)
	cfg := &tls.Config{RootCAs: serving, ServerName: "node1", Certificates: []tls.Certificate{c.client(t, "admin")}}
	var held []net.Conn
	for range 2 {
		conn, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	third, err := tls.DialWithDialer(&net.Dialer{Timeout: patience}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("a third handshake: %v", err)
	}
	defer third.Close()
	if _, err := third.Write([]byte("GET /healthz HTTP/1.1\r\nHost: node1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	third.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	answer := bufio.NewReader(third)
	if line, err := answer.ReadString('\n'); err == nil {
		t.Fatalf("a third connection was served beyond the cap of 2: %q", line)
	}
	// Once one closes, the waiting one is served.
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(patience))
	if line, err := answer.ReadString('\n'); err != nil || line != "HTTP/1.1 200 OK\r\n" {
		t.Fatalf("the waiting connection after one closed: %q, %v", line, err)
	}
	held[1].Close()
}
