package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// testCA issues client certificates and writes its own certificate as a
// clientCAFile.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+".crt")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, file: file}
}

func (c *testCA) issue(t *testing.T, user string, groups ...string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// nodeClient trusts the daemon's self-signed certificate, read from
// <root-dir>/pki/kubelet.crt, and presents cert (if any) or token (if any).
func nodeClient(t *testing.T, d *daemon, token string, certs ...tls.Certificate) *http.Client {
	t.Helper()
	pemBytes, err := os.ReadFile(filepath.Join(d.RootDir, "pki", "kubelet.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatal("pki/kubelet.crt holds no certificate")
	}
	var rt http.RoundTripper = &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: d.Name, Certificates: certs}}
	if token != "" {
		rt = bearer{token, rt}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: rt}
}

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

func fetch(c *http.Client, url string) (int, []byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// nodeAPIPaths are the node API's paths for the pod "np" of these tests.
var nodeAPIPaths = []string{"/healthz", "/pods", "/stats/summary", "/metrics", "/metrics/cadvisor", "/metrics/probes", "/metrics/resource",
	"/containerLogs/default/np-%s/main", "/logs/", "/configz", "/exec/default/np-%s/main"}

const nodeAPIPod = `apiVersion: v1
kind: Pod
metadata: {name: np}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; echo first line; echo second line; touch /tmp/ready; while true; do sleep 1 & wait $!; done"]
    resources: {limits: {memory: 64Mi, cpu: 500m}}
    readinessProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: 1
`

// The node API of a daemon with a client CA and AlwaysAllow: a client
// certificate of that CA reads every endpoint in its consumers' formats; no
// credentials, or a certificate of another CA (401, as the kubelet), read
// nothing; the read-only
// port never serves logs, metrics or configz.
func TestNodeAPIClientCertificates(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	good, other := newTestCA(t, d.Dir, "cluster-ca"), newTestCA(t, d.Dir, "other-ca")
	f, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "authentication: {x509: {clientCAFile: %s}}\nauthorization: {mode: AlwaysAllow}\n", good.file)
	f.Close()
	d.WriteManifest("np.yaml", nodeAPIPod)
	d.Start()
	pod := d.WaitRunning("np", time.Minute)
	base := fmt.Sprintf("https://127.0.0.1:%d", d.NodePort)
	cl := nodeClient(t, d, "", good.issue(t, "system:kube-apiserver-kubelet-client", "kubeadm:cluster-admins"))
	d.Eventually(30*time.Second, "node API answers", func() error {
		_, _, err := fetch(cl, base+"/healthz")
		return err
	})

	// Without credentials, nothing.
	none := nodeClient(t, d, "")
	for _, p := range nodeAPIPaths {
		p = strings.ReplaceAll(p, "%s", d.Name)
		if code, body, err := fetch(none, base+p); err != nil || code != http.StatusUnauthorized {
			t.Errorf("no credentials: %s = %d %q %v, want 401", p, code, body, err)
		}
	}
	otherCert := nodeClient(t, d, "", other.issue(t, "admin", "system:masters"))
	for _, p := range nodeAPIPaths {
		p = strings.ReplaceAll(p, "%s", d.Name)
		if code, body, err := fetch(otherCert, base+p); err != nil || code != http.StatusUnauthorized {
			t.Errorf("certificate of another CA: %s = %d %q %v, want 401", p, code, body, err)
		}
	}

	// With one, every format its consumer reads.
	d.Eventually(30*time.Second, "pod ready and its probes counted", func() error {
		code, body, err := fetch(cl, base+"/metrics/probes")
		if err != nil || code != 200 {
			return fmt.Errorf("%d %v", code, err)
		}
		fams := parseMetrics(t, "/metrics/probes", body)
		if metricValue(fams, "prober_probe_total", map[string]string{"pod": pod.Name, "container": "main", "probe_type": "Readiness", "result": "successful", "pod_uid": string(pod.UID)}) < 1 {
			return errors.New("no successful readiness probe counted")
		}
		return nil
	})
	code, body, err := fetch(cl, base+"/stats/summary")
	var sum statsapi.Summary
	if err != nil || code != 200 || json.Unmarshal(body, &sum) != nil {
		t.Fatalf("/stats/summary = %d %v %s", code, err, body)
	}
	found := false
	for _, p := range sum.Pods {
		if p.PodRef.Name == pod.Name && len(p.Containers) == 1 && p.Containers[0].Memory != nil && *p.Containers[0].Memory.WorkingSetBytes > 0 {
			found = true
		}
	}
	if sum.Node.NodeName != d.Name || !found {
		t.Errorf("summary lacks the node or the pod's container: %s", body)
	}
	if c := sum.Node.CPU; c == nil || c.UsageCoreNanoSeconds == nil || *c.UsageCoreNanoSeconds == 0 {
		t.Errorf("summary has no node CPU time: %s", body)
	}
	d.Eventually(30*time.Second, "cadvisor series of the container", func() error {
		_, body, err := fetch(cl, base+"/metrics/cadvisor")
		if err != nil {
			return err
		}
		fams := parseMetrics(t, "/metrics/cadvisor", body)
		labels := map[string]string{"pod": pod.Name, "namespace": "default", "container": "main"}
		if v := metricValue(fams, "container_spec_memory_limit_bytes", labels); v != 64<<20 {
			return fmt.Errorf("container_spec_memory_limit_bytes = %v", v)
		}
		if metricValue(fams, "container_memory_working_set_bytes", labels) <= 0 {
			return errors.New("no working set")
		}
		if metricValue(fams, "container_cpu_usage_seconds_total", labels) < 0 {
			return errors.New("no cpu")
		}
		return nil
	})
	_, body, _ = fetch(cl, base+"/metrics/resource")
	fams := parseMetrics(t, "/metrics/resource", body)
	if v := metricValue(fams, "container_memory_working_set_bytes", map[string]string{"pod": pod.Name, "namespace": "default", "container": "main"}); v <= 0 {
		t.Errorf("/metrics/resource container_memory_working_set_bytes = %v", v)
	}
	// The node's CPU time (the root cgroup's) is more than the pod's.
	podCPU := metricValue(fams, "pod_cpu_usage_seconds_total", map[string]string{"pod": pod.Name, "namespace": "default"})
	if v := metricValue(fams, "node_cpu_usage_seconds_total", nil); v <= 0 || v < podCPU {
		t.Errorf("/metrics/resource node_cpu_usage_seconds_total = %v, the pod's %v", v, podCPU)
	}
	_, body, _ = fetch(cl, base+"/metrics")
	fams = parseMetrics(t, "/metrics", body)
	if v := metricValue(fams, "kubelet_running_pods", nil); v != 1 {
		t.Errorf("kubelet_running_pods = %v", v)
	}
	// The pod went from Pending to Running once, and was synced.
	if h := fams["kubelet_pod_start_duration_seconds"]; h == nil || h.Metric[0].Histogram.GetSampleCount() != 1 || h.Metric[0].Histogram.GetSampleSum() <= 0 {
		t.Errorf("kubelet_pod_start_duration_seconds = %v", h)
	}
	synced := uint64(0)
	for _, m := range fams["kubelet_pod_worker_duration_seconds"].GetMetric() {
		synced += m.Histogram.GetSampleCount()
	}
	if synced < 2 {
		t.Errorf("kubelet_pod_worker_duration_seconds counts %d syncs, want the create and more", synced)
	}
	d.Eventually(30*time.Second, "container log", func() error {
		code, body, err := fetch(cl, base+"/containerLogs/default/"+pod.Name+"/main?tailLines=1")
		if err != nil || code != 200 || string(body) != "second line\n" {
			return fmt.Errorf("%d %q %v", code, body, err)
		}
		return nil
	})
	if code, body, _ := fetch(cl, base+"/containerLogs/default/"+pod.Name+"/main?limitBytes=5"); code != 200 || string(body) != "first" {
		t.Errorf("limitBytes=5: %d %q", code, body)
	}
	if code, body, _ := fetch(cl, base+"/containerLogs/default/"+pod.Name+"/main/../../../../etc/passwd"); code == 200 || strings.Contains(string(body), "root:") {
		t.Errorf("containerLogs traversal: %d %q", code, body)
	}
	if code, body, _ := fetch(cl, base+"/containerLogs/default/"+pod.Name+"/..%2f..%2fetc%2fpasswd"); code == 200 || strings.Contains(string(body), "root:") {
		t.Errorf("containerLogs traversal: %d %q", code, body)
	}
	if code, body, _ := fetch(cl, base+"/logs/"); code != 200 || !strings.Contains(string(body), "<a href") {
		t.Errorf("/logs/ = %d %q", code, body)
	}
	if code, body, _ := fetch(cl, base+"/logs/..%2f..%2fetc%2fpasswd"); code == 200 || strings.Contains(string(body), "root:") {
		t.Errorf("/logs/ traversal: %d %q", code, body)
	}
	if code, body, _ := fetch(cl, base+"/configz"); code != 200 || !strings.Contains(string(body), `"kubeletconfig"`) || !strings.Contains(string(body), good.file) {
		t.Errorf("/configz = %d %q", code, body)
	}

	// The read-only port: /healthz, /pods and /stats/summary, as the
	// kubelet's; the rest is the node API's only.
	if code, body, err := fetch(http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/stats/summary", d.Port)); err != nil || code != 200 || !strings.Contains(string(body), `"nodeName":"`+d.Name+`"`) {
		t.Errorf("read-only port: /stats/summary = %d %v %.200q", code, err, body)
	}
	for _, p := range nodeAPIPaths[3:] {
		p = strings.ReplaceAll(p, "%s", d.Name)
		if code, _, err := fetch(http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d%s", d.Port, p)); err != nil || code != http.StatusNotFound {
			t.Errorf("read-only port: %s = %d %v, want 404", p, code, err)
		}
	}
	d.RemoveManifest("np.yaml")
	d.Eventually(60*time.Second, "pod removed", func() error {
		if d.Pod("np") != nil {
			return errStill
		}
		return nil
	})
	d.AssertNoLeaks()
}

func parseMetrics(t *testing.T, path string, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	return fams
}

// metricValue is the value of the first series of name with labels; -1
// when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
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
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	return -1
}

// The node API with a kubeconfig and the kubelet's default modes (webhook
// authentication and authorization): a bearer token is what the API
// server's TokenReview says it is, and each request is what its
// SubjectAccessReview allows.
func TestNodeAPIWebhook(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		var tr authenticationv1.TokenReview
		decodeAPI(t, r, &tr)
		if tr.Spec.Token == "monitor-token" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:agent"}}
		}
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(tr)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		var sar authorizationv1.SubjectAccessReview
		decodeAPI(t, r, &sar)
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:agent" && ra != nil &&
			ra.Resource == "nodes" && ra.Name == d.Name && (ra.Subresource == "stats" || ra.Subresource == "metrics")
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(sar)
	})
	api := httptest.NewTLSServer(mux)
	t.Cleanup(api.Close)
	caFile := filepath.Join(d.Dir, "api-ca.crt")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}), 0o644)
	kubeconfig := filepath.Join(d.Dir, "kubelet.conf")
	os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: node-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, api.URL, caFile)), 0o600)
	d.Args = append(d.Args, "--kubeconfig", kubeconfig)
	d.Start()
	base := fmt.Sprintf("https://127.0.0.1:%d", d.NodePort)
	var monitor *http.Client
	d.Eventually(30*time.Second, "node API serves", func() error {
		if _, err := os.Stat(filepath.Join(d.RootDir, "pki", "kubelet.crt")); err != nil {
			return err
		}
		monitor = nodeClient(t, d, "monitor-token")
		_, _, err := fetch(monitor, base+"/healthz")
		return err
	})
	for path, want := range map[string]int{"/stats/summary": 200, "/metrics": 200, "/metrics/cadvisor": 200,
		"/pods": 403, "/logs/": 403, "/configz": 403, "/healthz": 403} {
		if code, body, err := fetch(monitor, base+path); err != nil || code != want {
			t.Errorf("monitor token: %s = %d %q %v, want %d", path, code, body, err, want)
		}
	}
	rejected := nodeClient(t, d, "stolen-token")
	for _, p := range nodeAPIPaths {
		p = strings.ReplaceAll(p, "%s", d.Name)
		if code, _, err := fetch(rejected, base+p); err != nil || code != http.StatusUnauthorized {
			t.Errorf("rejected token: %s = %d %v, want 401", p, code, err)
		}
	}
	d.Stop()
}

// decodeAPI reads a request as the API server does: protobuf (client-go's
// default for built-in types) or JSON.
func decodeAPI(t *testing.T, r *http.Request, into runtime.Object) {
	b, _ := io.ReadAll(r.Body)
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, into); err != nil {
		t.Errorf("decode %s: %v", r.Header.Get("Content-Type"), err)
	}
}
