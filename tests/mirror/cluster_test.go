//go:build controlplane

package mirror

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// binDir is where the control plane's binaries are: STATICPODD_CONTROLPLANE_BIN,
// else the cache the build target fills. Missing ones fail the test, saying
// how to build them.
func binDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STATICPODD_CONTROLPLANE_BIN")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			cache = filepath.Join(os.Getenv("HOME"), ".cache")
		}
		dir = filepath.Join(cache, "staticpodd", "controlplane", "v1.37.2", "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			t.Fatalf("%s is missing from %s: build the control plane first with 'make controlplane' (make test-controlplane does it)", b, dir)
		}
	}
	return dir
}

// pki is a CA and the certificates the test's API server and its clients use.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CA     string // PEM file
}

func newPKI(t *testing.T, dir string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "staticpodd-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &pki{dir: dir, caCert: cert, caKey: key, CA: filepath.Join(dir, "ca.crt")}
	writePEM(t, p.CA, "CERTIFICATE", der)
	return p
}

var serial int64 = 1

// issue writes name.crt and name.key: a serving certificate for 127.0.0.1
// when server, else a client certificate for cn in groups.
func (p *pki) issue(t *testing.T, name, cn string, groups []string, server bool) (crt, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
		tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default.svc"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &k.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	crt, key = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writePEM(t, crt, "CERTIFICATE", der)
	writePEM(t, key, "EC PRIVATE KEY", kd)
	return crt, key
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// proc is a process of the control plane, killed when the test ends.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t *testing.T, dir, bin string, args ...string) *proc {
	t.Helper()
	name := filepath.Base(bin)
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// tail is the end of the process's log, for a failure message.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// cluster is etcd and a kube-apiserver with the Node authorizer and the
// NodeRestriction admission plugin, as kubeadm sets them up, on loopback.
type cluster struct {
	t         *testing.T
	dir, bin  string
	pki       *pki
	etcd      *proc
	apiserver *proc
	etcdURL   string
	port      int      // the API server's secure port
	apiArgs   []string // to start it again
	Admin     kubernetes.Interface
	adminCfg  *rest.Config
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := newCluster(t)
	c.startAPIServer()
	c.waitReady(90 * time.Second)
	return c
}

// newCluster starts etcd and prepares the API server, which startAPIServer
// starts.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	testroot.Require(t)
	bin := binDir(t)
	dir := t.TempDir()
	c := &cluster{t: t, dir: dir, bin: bin, pki: newPKI(t, dir)}
	// Four distinct ports: two taken one after the other may be the same.
	ports := testdaemon.FreePorts(t, 4)
	peer, client, metrics := ports[0], ports[1], ports[2]
	c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	c.etcd = startProc(t, dir, filepath.Join(bin, "etcd"),
		"--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", c.etcdURL, "--advertise-client-urls", c.etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peer),
		"--listen-metrics-urls", fmt.Sprintf("http://127.0.0.1:%d", metrics))
	c.waitEtcd(30 * time.Second)

	servCrt, servKey := c.pki.issue(t, "apiserver", "kube-apiserver", nil, true)
	adminCrt, adminKey := c.pki.issue(t, "admin", "admin", []string{"system:masters"}, false)
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := x509.MarshalECPrivateKey(saKey)
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	writePEM(t, filepath.Join(dir, "sa.key"), "EC PRIVATE KEY", sa)
	writePEM(t, filepath.Join(dir, "sa.pub"), "PUBLIC KEY", saPub)
	c.port = ports[3]
	c.apiArgs = []string{
		"--etcd-servers", c.etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(c.port),
		"--endpoint-reconciler-type", "none",
		"--tls-cert-file", servCrt, "--tls-private-key-file", servKey, "--client-ca-file", c.pki.CA,
		"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/12", "--allow-privileged",
	}
	c.adminCfg = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", c.port),
		TLSClientConfig: rest.TLSClientConfig{CAFile: c.pki.CA, CertFile: adminCrt, KeyFile: adminKey},
		Timeout:         10 * time.Second,
	}
	c.Admin, err = kubernetes.NewForConfig(c.adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) startAPIServer() {
	c.apiserver = startProc(c.t, c.dir, filepath.Join(c.bin, "kube-apiserver"), c.apiArgs...)
}

// waitEtcd waits until etcd's client port accepts connections, failing with
// etcd's own log if it exits or does not listen in time.
func (c *cluster) waitEtcd(timeout time.Duration) {
	c.t.Helper()
	addr := strings.TrimPrefix(c.etcdURL, "http://")
	for end := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-c.etcd.done:
			c.t.Fatalf("etcd exited:\n%s", c.etcd.tail())
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return
		}
		if time.Now().After(end) {
			c.t.Fatalf("etcd does not listen on %s after %v:\n%s", addr, timeout, c.etcd.tail())
		}
	}
}

// waitReady waits until /readyz answers ok.
func (c *cluster) waitReady(timeout time.Duration) time.Time {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		body, err := c.Admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err == nil && string(body) == "ok" {
			return time.Now()
		}
		select {
		case <-c.apiserver.done:
			c.t.Fatalf("kube-apiserver exited:\n%s", c.apiserver.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("kube-apiserver not ready after %v: %v %s\n%s", timeout, err, body, c.apiserver.tail())
		}
	}
}

// nodeKubeconfig writes a kubeconfig with node's credentials
// (system:node:<node> in system:nodes, as kubeadm's kubelet.conf) for server.
func (c *cluster) nodeKubeconfig(node, server string) string {
	c.t.Helper()
	crt, key := c.pki.issue(c.t, "node-"+node, "system:node:"+node, []string{"system:nodes"}, false)
	path := filepath.Join(c.dir, "kubelet-"+node+".conf")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: node
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: node
  context: {cluster: test, user: node}
current-context: node
`, server, c.pki.CA, crt, key)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// faultProxy stands between staticpodd and the API server, passing
// requests on with the node's client certificate, or failing them as told.
type faultProxy struct {
	URL string

	mu   sync.Mutex
	mode string // "" passes, "5xx", "401", "slow"
	srv  *http.Server
}

func (c *cluster) startProxy(node string) *faultProxy {
	c.t.Helper()
	crt, key := c.pki.issue(c.t, "proxy", "proxy", nil, true)
	ncrt, nkey := c.pki.issue(c.t, "proxy-node-"+node, "system:node:"+node, []string{"system:nodes"}, false)
	serving, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		c.t.Fatal(err)
	}
	clientCert, err := tls.LoadX509KeyPair(ncrt, nkey)
	if err != nil {
		c.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.pki.caCert)
	target, _ := url.Parse(fmt.Sprintf("https://127.0.0.1:%d", c.port))
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}}
	p := &faultProxy{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	p.URL = "https://" + l.Addr().String()
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		switch mode {
		case "5xx":
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":"InternalError","code":500}`, http.StatusInternalServerError)
			return
		case "401":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
			return
		case "slow":
			select {
			case <-time.After(15 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{serving}}}
	go p.srv.ServeTLS(l, "", "")
	c.t.Cleanup(func() { p.srv.Close() })
	return p
}

func (p *faultProxy) set(mode string) {
	p.mu.Lock()
	p.mode = mode
	p.mu.Unlock()
	if mode != "" {
		// Streams in flight (the pod watch) end too, as a failing server's would.
		p.srv.SetKeepAlivesEnabled(false)
	} else {
		p.srv.SetKeepAlivesEnabled(true)
	}
}
