//go:build linux

// Package kubeapi is a real etcd and kube-apiserver on loopback, with the
// Node authorizer and the NodeRestriction admission plugin as kubeadm sets
// them up, for the tests that keep mirror pods on an API server (tests/mirror,
// tests/chaos): a CA and the certificates of the server and its clients, a
// node's kubeconfig, a proxy that fails requests on demand, and kill -9 and
// restart of either process.
package kubeapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// BinDir is where etcd and kube-apiserver are: $STATICPODD_CONTROLPLANE_BIN,
// else the cache make controlplane fills. The error says how to build them.
func BinDir() (string, error) {
	dir := os.Getenv("STATICPODD_CONTROLPLANE_BIN")
	if dir == "" {
		cache, err := cluster.CacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(cache, "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s is missing from %s: build the control plane first with 'make controlplane' (make test-controlplane does it)", b, dir)
		}
	}
	return dir, nil
}

// PKI is a CA and the certificates the API server and its clients use.
type PKI struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CA     string // PEM file
}

func newPKI(t testing.TB, dir string) *PKI {
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
	p := &PKI{dir: dir, caCert: cert, caKey: key, CA: filepath.Join(dir, "ca.crt")}
	writePEM(t, p.CA, "CERTIFICATE", der)
	return p
}

var serial atomic.Int64

// Issue writes name.crt and name.key: a serving certificate for 127.0.0.1
// when server, else a client certificate for cn in groups.
func (p *PKI) Issue(t testing.TB, name, cn string, groups []string, server bool) (crt, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1) + 1), Subject: pkix.Name{CommonName: cn, Organization: groups},
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

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Proc is a process of the control plane, killed when the test ends.
type Proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t testing.TB, dir, bin string, args ...string) *Proc {
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
	p := &Proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Kill)
	return p
}

// Kill sends SIGKILL to the process (and its group) and waits for its end.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Tail is the end of the process's log (of all its runs), for a failure
// message.
func (p *Proc) Tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Cluster is etcd and a kube-apiserver with the Node authorizer and the
// NodeRestriction admission plugin, as kubeadm sets them up, on loopback.
type Cluster struct {
	t         testing.TB
	dir, bin  string
	PKI       *PKI
	Etcd      *Proc
	APIServer *Proc // nil until StartAPIServer
	etcdURL   string
	etcdArgs  []string // to start it again
	Port      int      // the API server's secure port
	apiArgs   []string // to start it again
	Admin     kubernetes.Interface
	adminCrt  string
	adminKey  string
	// AuditLog holds one JSON line per write to a pod (create, update,
	// patch, delete), at the Metadata level: who, what, the answer's code.
	AuditLog string
}

// Start starts etcd and the API server and waits until it is ready.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c := New(t)
	c.StartAPIServer()
	c.WaitReady(90 * time.Second)
	return c
}

// New starts etcd and prepares the API server, which StartAPIServer
// starts. Missing binaries fail the test, saying how to build them.
func New(t testing.TB) *Cluster {
	t.Helper()
	testroot.Require(t)
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &Cluster{t: t, dir: dir, bin: bin, PKI: newPKI(t, dir)}
	// Four distinct ports: two taken one after the other may be the same.
	ports := testdaemon.FreePorts(t, 4)
	peer, client, metrics := ports[0], ports[1], ports[2]
	c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	c.etcdArgs = []string{
		"--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", c.etcdURL, "--advertise-client-urls", c.etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peer),
		"--listen-metrics-urls", fmt.Sprintf("http://127.0.0.1:%d", metrics),
	}
	c.StartEtcd()

	servCrt, servKey := c.PKI.Issue(t, "apiserver", "kube-apiserver", nil, true)
	adminCrt, adminKey := c.PKI.Issue(t, "admin", "admin", []string{"system:masters"}, false)
	c.adminCrt, c.adminKey = adminCrt, adminKey
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := x509.MarshalECPrivateKey(saKey)
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	writePEM(t, filepath.Join(dir, "sa.key"), "EC PRIVATE KEY", sa)
	writePEM(t, filepath.Join(dir, "sa.pub"), "PUBLIC KEY", saPub)
	c.Port = ports[3]
	c.AuditLog = filepath.Join(dir, "audit.log")
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: [pods, pods/status]}]
  verbs: [create, update, patch, delete]
- level: None
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.apiArgs = []string{
		"--etcd-servers", c.etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(c.Port),
		"--endpoint-reconciler-type", "none",
		"--tls-cert-file", servCrt, "--tls-private-key-file", servKey, "--client-ca-file", c.PKI.CA,
		"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/12", "--allow-privileged",
		"--audit-policy-file", policy, "--audit-log-path", c.AuditLog, "--audit-log-mode", "blocking",
	}
	adminCfg := &rest.Config{
		Host:            c.Server(),
		TLSClientConfig: rest.TLSClientConfig{CAFile: c.PKI.CA, CertFile: adminCrt, KeyFile: adminKey},
		Timeout:         10 * time.Second,
	}
	c.Admin, err = kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// EnableBootstrapTokens has the API server, started next, authenticate
// bootstrap tokens (kubeadm's --enable-bootstrap-token-auth), for TLS
// bootstrap.
func (c *Cluster) EnableBootstrapTokens() {
	c.apiArgs = append(c.apiArgs, "--enable-bootstrap-token-auth")
}

// StartControllerManager starts kube-controller-manager with the controllers
// that approve and sign the nodes' client certificates (csrapproving,
// csrsigning, with the cluster CA as kubeadm sets it up), serving nothing,
// and extra args.
func (c *Cluster) StartControllerManager(args ...string) *Proc {
	c.t.Helper()
	caKey, err := x509.MarshalECPrivateKey(c.PKI.caKey)
	if err != nil {
		c.t.Fatal(err)
	}
	keyFile := filepath.Join(c.dir, "ca.key")
	writePEM(c.t, keyFile, "EC PRIVATE KEY", caKey)
	kubeconfig := c.adminKubeconfig()
	return startProc(c.t, c.dir, filepath.Join(c.bin, "kube-controller-manager"), append([]string{
		"--kubeconfig", kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers", "csrapproving,csrsigning",
		"--cluster-signing-cert-file", c.PKI.CA, "--cluster-signing-key-file", keyFile,
	}, args...)...)
}

// adminKubeconfig writes a kubeconfig with the admin's credentials and
// returns its path.
func (c *Cluster) adminKubeconfig() string {
	c.t.Helper()
	kubeconfig := filepath.Join(c.dir, "admin.conf")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: admin, user: {client-certificate: %q, client-key: %q}}]
contexts: [{name: admin, context: {cluster: test, user: admin}}]
current-context: admin
`, c.Server(), c.PKI.CA, c.adminCrt, c.adminKey)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return kubeconfig
}

// Kubectl runs the control plane's kubectl as the admin and returns its
// stdout; an error carries its stderr.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig", c.adminKubeconfig()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return string(out), nil
}

// Server is the API server's URL.
func (c *Cluster) Server() string { return fmt.Sprintf("https://127.0.0.1:%d", c.Port) }

// StartEtcd starts etcd on its data directory (again, after a kill) and
// waits until it listens.
func (c *Cluster) StartEtcd() {
	c.t.Helper()
	c.Etcd = startProc(c.t, c.dir, filepath.Join(c.bin, "etcd"), c.etcdArgs...)
	c.waitEtcd(30 * time.Second)
}

// EtcdDataDir is etcd's data directory: a copy made while etcd is killed
// is a backup, put back in its place a restore.
func (c *Cluster) EtcdDataDir() string { return filepath.Join(c.dir, "etcd") }

// StartAPIServer starts the API server (again, after a kill).
func (c *Cluster) StartAPIServer() {
	c.APIServer = startProc(c.t, c.dir, filepath.Join(c.bin, "kube-apiserver"), c.apiArgs...)
}

// waitEtcd waits until etcd's client port accepts connections, failing with
// etcd's own log if it exits or does not listen in time.
func (c *Cluster) waitEtcd(timeout time.Duration) {
	c.t.Helper()
	addr := strings.TrimPrefix(c.etcdURL, "http://")
	for end := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-c.Etcd.done:
			c.t.Fatalf("etcd exited:\n%s", c.Etcd.Tail())
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return
		}
		if time.Now().After(end) {
			c.t.Fatalf("etcd does not listen on %s after %v:\n%s", addr, timeout, c.Etcd.Tail())
		}
	}
}

// WaitReady waits until /readyz answers ok, and returns when it did.
func (c *Cluster) WaitReady(timeout time.Duration) time.Time {
	c.t.Helper()
	ready, err := c.Ready(timeout)
	if err != nil {
		c.t.Fatal(err)
	}
	return ready
}

// Ready waits until /readyz answers ok, and returns when it did; the error
// carries the API server's log if it exits or is not ready in time.
func (c *Cluster) Ready(timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		body, err := c.Admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err == nil && string(body) == "ok" {
			return time.Now(), nil
		}
		select {
		case <-c.APIServer.done:
			return time.Time{}, fmt.Errorf("kube-apiserver exited:\n%s", c.APIServer.Tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("kube-apiserver not ready after %v: %v %s\n%s", timeout, err, body, c.APIServer.Tail())
		}
	}
}

// NodeKubeconfig writes a kubeconfig with node's credentials
// (system:node:<node> in system:nodes, as kubeadm's kubelet.conf) for server.
func (c *Cluster) NodeKubeconfig(node, server string) string {
	c.t.Helper()
	crt, key := c.PKI.Issue(c.t, "node-"+node, "system:node:"+node, []string{"system:nodes"}, false)
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
`, server, c.PKI.CA, crt, key)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// Audit is the writes to pod namespace/name the API server logged (of all
// its runs), one a line: when, verb, user, the answer's code and the pod's
// UID where the log has it.
func (c *Cluster) Audit(namespace, name string) string {
	f, err := os.Open(c.AuditLog)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var b strings.Builder
	dec := json.NewDecoder(f)
	for {
		var ev struct {
			StageTimestamp time.Time `json:"stageTimestamp"`
			Verb           string    `json:"verb"`
			User           struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Namespace, Name, Subresource, UID string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"responseStatus"`
		}
		if err := dec.Decode(&ev); err != nil {
			break
		}
		if ev.ObjectRef.Namespace != namespace || ev.ObjectRef.Name != name {
			continue
		}
		fmt.Fprintf(&b, "  %s %s %s %s uid=%s code=%d %s\n", ev.StageTimestamp.UTC().Format("15:04:05.000000"), ev.Verb,
			ev.ObjectRef.Subresource, ev.User.Username, ev.ObjectRef.UID, ev.ResponseStatus.Code, ev.ResponseStatus.Message)
	}
	return b.String()
}
