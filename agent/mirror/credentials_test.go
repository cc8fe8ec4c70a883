package mirror

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

// testCA issues the API server's certificate and the nodes'.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// sign issues a certificate of pub for subject, valid from notBefore to
// notAfter.
func (ca *testCA) sign(t *testing.T, serial int64, subject pkix.Name, pub any, notBefore, notAfter time.Time, server bool) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subject, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// nodeCert is a client certificate and key of node, valid until notAfter.
func (ca *testCA) nodeCert(t *testing.T, serial int64, node string, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	subject := pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}
	return ca.sign(t, serial, subject, &key.PublicKey, time.Now().Add(-time.Hour), notAfter, false),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// csrServer is an API server of the CSR API that approves and signs every
// request (as kube-controller-manager does with kubeadm's RBAC), and
// records the serial of each client certificate a request presented.
type csrServer struct {
	t   *testing.T
	ca  *testCA
	srv *httptest.Server

	mu    sync.Mutex
	hang  int // CSR creations still to leave unanswered
	later int // CSR creations still to answer with a Retry-After of an hour
	// noWatchList: refuse a streamed list (sendInitialEvents), as an API
	// server without the WatchList feature does; streamed and watched
	// count the watches asked with it and without.
	noWatchList       bool
	streamed, watched int
	expired           bool // issue certificates that expired a minute ago
	created           int  // CSRs created
	csrs              map[string]*certificatesv1.CertificateSigningRequest
	serials           []string // of the client certificates of /api/v1/nodes requests
	next              int64
}

func newCSRServer(t *testing.T, ca *testCA) *csrServer {
	s := &csrServer{t: t, ca: ca, csrs: map[string]*certificatesv1.CertificateSigningRequest{}, next: 100}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	cert, err := tls.X509KeyPair(ca.sign(t, 2, pkix.Name{CommonName: "apiserver"}, &key.PublicKey, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), true),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
	if err != nil {
		t.Fatal(err)
	}
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *csrServer) serve(w http.ResponseWriter, r *http.Request) {
	const csrPath = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == csrPath:
		s.mu.Lock()
		hang := s.hang > 0
		s.hang--
		s.mu.Unlock()
		if hang {
			// Read whole, so that the server sees the client go.
			io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		s.mu.Lock()
		later := s.later > 0
		s.later--
		s.mu.Unlock()
		if later {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
			json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonTooManyRequests, Code: http.StatusTooManyRequests})
			return
		}
		var csr certificatesv1.CertificateSigningRequest
		decode(s.t, r, &csr)
		block, _ := pem.Decode(csr.Spec.Request)
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.next++
		csr.Name = fmt.Sprintf("csr-%d", s.next)
		csr.UID = types.UID("uid-" + csr.Name)
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue}}
		notBefore, notAfter := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
		if s.expired {
			notBefore, notAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Minute)
		}
		csr.Status.Certificate = s.ca.sign(s.t, s.next, req.Subject, req.PublicKey, notBefore, notAfter, false)
		s.created++
		s.csrs[csr.Name] = &csr
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(&csr)
	case r.Method == http.MethodGet && r.URL.Path == csrPath && r.URL.Query().Get("watch") == "true":
		// The CSR as it is (client-go lists by a watch that sends the
		// initial events, ended by a bookmark), then nothing more.
		name := strings.TrimPrefix(r.URL.Query().Get("fieldSelector"), "metadata.name=")
		q := r.URL.Query()
		stream := q.Get("sendInitialEvents") == "true"
		s.mu.Lock()
		if stream {
			s.streamed++
		} else {
			s.watched++
		}
		refuse := stream && s.noWatchList
		s.mu.Unlock()
		if stream && (q.Get("resourceVersionMatch") != "NotOlderThan" || q.Get("allowWatchBookmarks") != "true") {
			s.t.Errorf("streamed list without its parameters: %s", r.URL.RawQuery)
		}
		if refuse {
			// kube-apiserver's answer (ValidateListOptions) with the
			// feature off.
			w.WriteHeader(http.StatusUnprocessableEntity)
			json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonInvalid, Code: http.StatusUnprocessableEntity,
				Message: "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"})
			return
		}
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w)
		s.mu.Lock()
		if csr := s.csrs[name]; csr != nil {
			c := *csr
			c.TypeMeta = metav1.TypeMeta{Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1"}
			c.ResourceVersion = "1"
			enc.Encode(map[string]any{"type": "ADDED", "object": &c})
		}
		s.mu.Unlock()
		enc.Encode(map[string]any{"type": "BOOKMARK", "object": &certificatesv1.CertificateSigningRequest{
			TypeMeta:   metav1.TypeMeta{Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1", Annotations: map[string]string{"k8s.io/initial-events-end": "true"}},
		}})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case r.Method == http.MethodGet && r.URL.Path == csrPath:
		name := strings.TrimPrefix(r.URL.Query().Get("fieldSelector"), "metadata.name=")
		list := certificatesv1.CertificateSigningRequestList{TypeMeta: metav1.TypeMeta{Kind: "CertificateSigningRequestList", APIVersion: "certificates.k8s.io/v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
		s.mu.Lock()
		if csr := s.csrs[name]; csr != nil {
			list.Items = append(list.Items, *csr)
		}
		s.mu.Unlock()
		json.NewEncoder(w).Encode(&list)
	case r.URL.Path == "/api/v1/nodes/n":
		s.mu.Lock()
		serial := "none"
		if len(r.TLS.PeerCertificates) > 0 {
			serial = r.TLS.PeerCertificates[0].SerialNumber.String()
		}
		s.serials = append(s.serials, serial)
		s.mu.Unlock()
		json.NewEncoder(w).Encode(&v1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	default:
		http.NotFound(w, r)
	}
}

// kubeconfig writes a kubeconfig for the server with the user yaml given.
func (s *csrServer) kubeconfig(t *testing.T, dir, name, user string) string {
	t.Helper()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, s.ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: %s}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, s.srv.URL, ca, user)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// getNode asks for the Node with rc, and returns the serial of the client
// certificate the server saw.
func (s *csrServer) getNode(t *testing.T, creds *Credentials) string {
	t.Helper()
	rc, err := creds.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	rc.Timeout = 5 * time.Second
	a, err := newRESTAPI(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Nodes().Get(context.Background(), "n", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serials[len(s.serials)-1]
}

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(timeout); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not after %v", what, timeout)
		}
	}
}

// A node with only bootstrap credentials: the kubeconfig is written at once
// pointing at the store (as the kubelet's LoadClientConfig does), the CSR
// is the kubelet's, the certificate and its key land in the store 0600, and
// the clients present it.
func TestTLSBootstrap(t *testing.T) {
	ca := newTestCA(t)
	s := newCSRServer(t, ca)
	dir := t.TempDir()
	boot := s.kubeconfig(t, dir, "bootstrap-kubelet.conf", "{token: abcdef.0123456789abcdef}")
	kubeconfig := filepath.Join(dir, "etc", "kubelet.conf")
	certDir := filepath.Join(dir, "pki")
	creds := NewCredentials(CredentialsConfig{Kubeconfig: kubeconfig, BootstrapKubeconfig: boot, CertDir: certDir,
		NodeName: "n", Rotate: true, Version: "test"}, testLogger())
	defer creds.Close()
	if _, err := creds.RESTConfig(); err != nil {
		t.Fatal(err)
	}
	current := filepath.Join(certDir, "kubelet-client-current.pem")
	loaded, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig written: %v", err)
	}
	auth := loaded.AuthInfos[loaded.Contexts[loaded.CurrentContext].AuthInfo]
	if auth.ClientCertificate != current || auth.ClientKey != current || auth.Token != "" ||
		loaded.Clusters[loaded.Contexts[loaded.CurrentContext].Cluster].Server != s.srv.URL {
		t.Errorf("kubeconfig %+v, want the bootstrap's server with %s", auth, current)
	}
	if fi, err := os.Stat(kubeconfig); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v %v", fi.Mode(), err)
	}

	waitFor(t, 10*time.Second, "a certificate", func() bool { return creds.certificate() != nil })
	leaf := creds.certificate().Leaf
	if leaf.Subject.CommonName != "system:node:n" || len(leaf.Subject.Organization) != 1 || leaf.Subject.Organization[0] != "system:nodes" {
		t.Errorf("certificate subject %v", leaf.Subject)
	}
	s.mu.Lock()
	for _, csr := range s.csrs {
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName ||
			fmt.Sprint(csr.Spec.Usages) != "[digital signature client auth]" {
			t.Errorf("CSR signer %q usages %v, want the kubelet's", csr.Spec.SignerName, csr.Spec.Usages)
		}
	}
	s.mu.Unlock()
	target, err := os.Readlink(current)
	if err != nil || filepath.Dir(target) != certDir || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") {
		t.Errorf("%s -> %q (%v), want a dated file in %s", current, target, err, certDir)
	}
	if fi, err := os.Stat(current); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("certificate and key file mode %v %v", fi.Mode(), err)
	}
	if got, want := s.getNode(t, creds), leaf.SerialNumber.String(); got != want {
		t.Errorf("the server saw certificate %s, want the issued %s", got, want)
	}
	if _, err := clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		t.Errorf("the kubeconfig does not load now the certificate is there: %v", err)
	}
}

// kubeadm init's kubelet.conf, with its certificate embedded: it is
// stored as the first certificate (kubeadm's kubelet-finalize looks for
// kubelet-client-current.pem), rotated out at once with a CSR sent with
// it, and the clients move to the new certificate without being made again.
func TestRotationFromAnEmbeddedCertificate(t *testing.T) {
	ca := newTestCA(t)
	s := newCSRServer(t, ca)
	dir := t.TempDir()
	certPEM, keyPEM := ca.nodeCert(t, 7, "n", time.Now().Add(time.Hour))
	user := fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}", b64(certPEM), b64(keyPEM))
	kubeconfig := s.kubeconfig(t, dir, "kubelet.conf", user)
	before, _ := os.ReadFile(kubeconfig)
	creds := NewCredentials(CredentialsConfig{Kubeconfig: kubeconfig, CertDir: filepath.Join(dir, "pki"),
		NodeName: "n", Rotate: true, Version: "test"}, testLogger())
	defer creds.Close()
	if _, err := creds.RESTConfig(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pki", "kubelet-client-current.pem")); err != nil {
		t.Errorf("the embedded certificate is not stored: %v", err)
	}
	// The first request may go out before the rotation or after.
	s.getNode(t, creds)
	waitFor(t, 10*time.Second, "the embedded certificate rotated out", func() bool {
		c := creds.certificate()
		return c != nil && c.Leaf.SerialNumber.Int64() != 7
	})
	want := creds.certificate().Leaf.SerialNumber.String()
	waitFor(t, 2*certificateCheckPeriod, "the server sees the new certificate", func() bool { return s.getNode(t, creds) == want })
	if after, _ := os.ReadFile(kubeconfig); string(after) != string(before) {
		t.Errorf("the kubeconfig was rewritten without a bootstrap kubeconfig")
	}
}

// A valid kubeconfig is kept even with a bootstrap kubeconfig; an expired
// one is replaced by one pointing at the store.
func TestBootstrapOnlyWhenTheKubeconfigIsNotValid(t *testing.T) {
	ca := newTestCA(t)
	s := newCSRServer(t, ca)
	for _, tc := range []struct {
		name     string
		notAfter time.Time
		kept     bool
	}{
		{"valid", time.Now().Add(time.Hour), true},
		{"expired", time.Now().Add(-time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			certPEM, keyPEM := ca.nodeCert(t, 9, "n", tc.notAfter)
			kubeconfig := s.kubeconfig(t, dir, "kubelet.conf",
				fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}", b64(certPEM), b64(keyPEM)))
			boot := s.kubeconfig(t, dir, "bootstrap-kubelet.conf", "{token: abcdef.0123456789abcdef}")
			before, _ := os.ReadFile(kubeconfig)
			creds := NewCredentials(CredentialsConfig{Kubeconfig: kubeconfig, BootstrapKubeconfig: boot,
				CertDir: filepath.Join(dir, "pki"), NodeName: "n", Version: "test"}, testLogger())
			defer creds.Close()
			if _, err := creds.RESTConfig(); err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(kubeconfig)
			if kept := string(after) == string(before); kept != tc.kept {
				t.Errorf("kubeconfig kept %v, want %v", kept, tc.kept)
			}
			if tc.kept {
				return
			}
			// Without rotation: one certificate, and the manager stops.
			waitFor(t, 10*time.Second, "a certificate", func() bool { return creds.certificate() != nil })
			if got, want := s.getNode(t, creds), creds.certificate().Leaf.SerialNumber.String(); got != want {
				t.Errorf("the server saw %s, want %s", got, want)
			}
		})
	}
}

// A store symlink that leads out of the certificate directory is refused,
// not read or replaced.
func TestCertDirSymlinkOutIsRefused(t *testing.T) {
	ca := newTestCA(t)
	s := newCSRServer(t, ca)
	dir := t.TempDir()
	certDir := filepath.Join(dir, "pki")
	os.MkdirAll(certDir, 0o700)
	outside := filepath.Join(dir, "outside.pem")
	os.WriteFile(outside, []byte("not yours"), 0o600)
	if err := os.Symlink(outside, filepath.Join(certDir, "kubelet-client-current.pem")); err != nil {
		t.Fatal(err)
	}
	boot := s.kubeconfig(t, dir, "bootstrap-kubelet.conf", "{token: abcdef.0123456789abcdef}")
	creds := NewCredentials(CredentialsConfig{Kubeconfig: filepath.Join(dir, "kubelet.conf"), BootstrapKubeconfig: boot,
		CertDir: certDir, NodeName: "n", Rotate: true}, testLogger())
	defer creds.Close()
	_, err := creds.RESTConfig()
	if err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("RESTConfig = %v, want a refusal of the symlink out", err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "not yours" {
		t.Errorf("the file outside changed: %q", b)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// An API server that accepts connections and never answers stalls nothing:
// the client configuration is there at once, the missing certificate is
// reported, and Close returns.
func TestBootstrapAgainstAServerThatNeverAnswers(t *testing.T) {
	ca := newTestCA(t)
	hung := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hung)
	dir := t.TempDir()
	ca.pem = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	s := &csrServer{t: t, ca: ca, srv: srv}
	boot := s.kubeconfig(t, dir, "bootstrap-kubelet.conf", "{token: abcdef.0123456789abcdef}")
	creds := NewCredentials(CredentialsConfig{Kubeconfig: filepath.Join(dir, "kubelet.conf"), BootstrapKubeconfig: boot,
		CertDir: filepath.Join(dir, "pki"), NodeName: "n", Rotate: true}, testLogger())
	var mu sync.Mutex
	reported := map[string]error{}
	creds.setReport(func(part string, err error) {
		mu.Lock()
		defer mu.Unlock()
		reported[part] = err
	})
	start := time.Now()
	if _, err := creds.RESTConfig(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("RESTConfig took %v against a server that never answers", took)
	}
	waitFor(t, 5*time.Second, "the missing certificate reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		err := reported["client certificate"]
		return err != nil && strings.Contains(err.Error(), "waiting for the certificate signing request")
	})
	start = time.Now()
	creds.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v", took)
	}
}

// A CSR creation the server never answers, or answers "try again in an
// hour" (429 with a Retry-After, which client-go's REST client obeys, up to
// 10 times, before it returns), is given up after csrRequestTimeout, and the
// next try gets the certificate.
func TestUnansweredCSRIsTriedAgain(t *testing.T) {
	for _, tc := range []struct {
		name        string
		hang, later int
	}{
		{"never answered", 1, 0},
		{"answered with an hour's Retry-After", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(d time.Duration) { csrRequestTimeout = d }(csrRequestTimeout)
			csrRequestTimeout = 200 * time.Millisecond
			ca := newTestCA(t)
			s := newCSRServer(t, ca)
			s.hang, s.later = tc.hang, tc.later
			dir := t.TempDir()
			boot := s.kubeconfig(t, dir, "bootstrap-kubelet.conf", "{token: abcdef.0123456789abcdef}")
			creds := NewCredentials(CredentialsConfig{Kubeconfig: filepath.Join(dir, "kubelet.conf"), BootstrapKubeconfig: boot,
				CertDir: filepath.Join(dir, "pki"), NodeName: "n", Rotate: true}, testLogger())
			defer creds.Close()
			if _, err := creds.RESTConfig(); err != nil {
				t.Fatal(err)
			}
			// The manager's back-off waits 2 s before its second try.
			waitFor(t, 10*time.Second, "a certificate after a CSR creation "+tc.name, func() bool { return creds.certificate() != nil })
		})
	}
}

// The certificate's wait streams its list (client-go's WatchListClient)
// from an API server that can, and lists then watches from one that
// refuses the streamed list (one without the WatchList feature).
func TestCSRWaitWithAndWithoutWatchList(t *testing.T) {
	for _, noWatchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("noWatchList=%v", noWatchList), func(t *testing.T) {
			ca := newTestCA(t)
			s := newCSRServer(t, ca)
			s.noWatchList = noWatchList
			dir := t.TempDir()
			boot := s.kubeconfig(t, dir, "bootstrap-kubelet.conf", "{token: abcdef.0123456789abcdef}")
			creds := NewCredentials(CredentialsConfig{Kubeconfig: filepath.Join(dir, "kubelet.conf"), BootstrapKubeconfig: boot,
				CertDir: filepath.Join(dir, "pki"), NodeName: "n", Rotate: true}, testLogger())
			defer creds.Close()
			if _, err := creds.RESTConfig(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "a certificate", func() bool { return creds.certificate() != nil })
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.streamed == 0 {
				t.Errorf("no streamed list asked for")
			}
			if noWatchList && s.watched == 0 {
				t.Errorf("the streamed list refused, and no watch without it")
			}
			if !noWatchList && s.watched != 0 {
				t.Errorf("%d watches without a streamed list, from a server that streams them", s.watched)
			}
		})
	}
}

// A certificate the API server issues already expired is not stored: it
// would replace the current one in the store, and the manager, finding it
// due for rotation at once, would send a CSR and write a new file in the
// certificate directory every second for as long as the signer does so.
// Refused, the request is tried again after the manager's back-off.
func TestExpiredIssuedCertificateNotStored(t *testing.T) {
	ca := newTestCA(t)
	s := newCSRServer(t, ca)
	s.expired = true
	dir := t.TempDir()
	certDir := filepath.Join(dir, "pki")
	boot := s.kubeconfig(t, dir, "bootstrap-kubelet.conf", "{token: abcdef.0123456789abcdef}")
	creds := NewCredentials(CredentialsConfig{Kubeconfig: filepath.Join(dir, "kubelet.conf"), BootstrapKubeconfig: boot,
		CertDir: certDir, NodeName: "n", Rotate: true}, testLogger())
	defer creds.Close()
	if _, err := creds.RESTConfig(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "a second CSR", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.created >= 2
	})
	files, err := filepath.Glob(filepath.Join(certDir, "kubelet-client-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 0 {
		t.Errorf("expired certificates stored: %v", files)
	}
}
