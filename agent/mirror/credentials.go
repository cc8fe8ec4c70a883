package mirror

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/transport"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/connrotation"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/mirror/certificate"
)

// CredentialsConfig says where the node's credentials to the API server
// come from: the kubelet's --kubeconfig, --bootstrap-kubeconfig, --cert-dir
// and rotateCertificates.
type CredentialsConfig struct {
	Kubeconfig          string
	BootstrapKubeconfig string // "" = no TLS bootstrap
	CertDir             string // kubelet-client-current.pem and its dated files
	NodeName            string
	Rotate              bool // rotateCertificates
	Version             string
}

// Credentials make the client configuration every client of the node
// (the mirror pods, the Node, its Lease, events, and the node API's
// reviews) uses, as the kubelet's buildKubeletClientConfig does.
//
// With neither TLS bootstrap nor rotation, it is the kubeconfig, read anew
// at each call until a client works. Otherwise client-go's certificate
// manager (copied into agent/mirror/certificate) keeps the node's client
// certificate in CertDir, requesting it with a CSR (bootstrap) and again
// before it expires (rotation), and the configuration's transport presents
// whatever certificate the manager has now, closing its connections when it
// changes, so that every client moves to the new one without being made
// again.
type Credentials struct {
	cfg    CredentialsConfig
	logger *slog.Logger

	mu      sync.Mutex
	rc      *rest.Config // the managed configuration once made; nil before
	manager certificate.Manager
	closed  bool
	stop    chan struct{} // ends watchCertificate
	done    chan struct{} // closed when watchCertificate returned
	report  func(part string, err error)
}

// NewCredentials returns the credentials of cfg; nothing is read until
// RESTConfig.
func NewCredentials(cfg CredentialsConfig, logger *slog.Logger) *Credentials {
	return &Credentials{cfg: cfg, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
}

// managed: client-go's certificate manager holds the client certificate:
// with rotation, or to bootstrap one when the kubeconfig has none valid
// (with a valid one and no rotation the kubelet only reads it).
func (c *Credentials) managed() bool {
	c.mu.Lock()
	started := c.manager != nil
	c.mu.Unlock()
	return started || c.cfg.Rotate || (c.cfg.BootstrapKubeconfig != "" && !clientConfigStillValid(c.cfg.Kubeconfig))
}

// setReport gives the mirror's health the certificate's state.
func (c *Credentials) setReport(f func(part string, err error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.report = f
}

// RESTConfig returns a client configuration, without a timeout, QPS 50 and
// burst 100 (the kubelet's kubeAPIQPS and kubeAPIBurst). An error means
// there is none yet (no kubeconfig, no bootstrap kubeconfig); the caller
// tries again later.
func (c *Credentials) RESTConfig() (*rest.Config, error) {
	var rc *rest.Config
	if c.managed() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return nil, errors.New("credentials closed")
		}
		if c.rc == nil {
			if err := c.start(); err != nil {
				return nil, err
			}
		}
		rc = rest.CopyConfig(c.rc)
	} else {
		var err error
		if rc, err = clientcmd.BuildConfigFromFlags("", c.cfg.Kubeconfig); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", c.cfg.Kubeconfig, err)
		}
	}
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "staticpodd/" + c.cfg.Version
	return rc, nil
}

// Close stops the certificate manager and the transport's watch of it.
func (c *Credentials) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	m := c.manager
	// Unlocked: watchCertificate takes c.mu to report.
	c.mu.Unlock()
	if m != nil {
		m.Stop()
		close(c.stop)
		<-c.done
	}
}

// certificate is the client certificate in use now; nil without one
// (not managed, or not issued yet, or expired).
func (c *Credentials) certificate() *tls.Certificate {
	c.mu.Lock()
	m := c.manager
	c.mu.Unlock()
	if m == nil {
		return nil
	}
	return m.Current()
}

// start is the kubelet's rotating client configuration
// (buildKubeletClientConfig with RotateCertificates, and LoadClientCert
// without): load the configuration, make the certificate manager with the
// kubeconfig's own certificate as its first one (kubeadm init's
// kubelet.conf, which the kubelet stores and rotates out at once), and the
// transport that follows the manager. c.mu is held.
func (c *Credentials) start() error {
	certConfig, clientConfig, err := c.loadClientConfig()
	if err != nil {
		return err
	}
	if err := checkCertDir(c.cfg.CertDir); err != nil {
		return err
	}
	store, err := certificate.NewFileStore("kubelet-client", c.cfg.CertDir, c.cfg.CertDir, clientConfig.CertFile, clientConfig.KeyFile)
	if err != nil {
		return fmt.Errorf("client certificate store %s: %w", c.cfg.CertDir, err)
	}
	newClient := func(current *tls.Certificate) (certificate.CSRClient, error) {
		// As the kubelet's buildClientCertificateManager: with a valid
		// certificate, request the next with it (the node's own
		// credentials); without, with the bootstrap ones.
		cfg := certConfig
		if current != nil {
			cfg = clientConfig
		}
		return newCSRClient(cfg)
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: newClient,
		// NewKubeletClientCertificateManager's template, signer and usages.
		Template: &x509.CertificateRequest{
			Subject: pkix.Name{
				CommonName:   "system:node:" + c.cfg.NodeName,
				Organization: []string{"system:nodes"},
			},
		},
		SignerName:              certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:               certificate.DefaultKubeletClientGetUsages,
		BootstrapCertificatePEM: clientConfig.CertData,
		BootstrapKeyPEM:         clientConfig.KeyData,
		CertificateStore:        store,
	})
	if err != nil {
		return fmt.Errorf("client certificate manager: %w", err)
	}
	rc := rest.AnonymousClientConfig(clientConfig)
	dialer, err := rotatingTransport(rc, m)
	if err != nil {
		return err
	}
	c.rc, c.manager = rc, m
	if c.cfg.Rotate || m.Current() == nil {
		m.Start()
	}
	go c.watchCertificate(m, dialer)
	return nil
}

// loadClientConfig is the kubelet's bootstrap.LoadClientConfig: without a
// bootstrap kubeconfig, the kubeconfig serves both to request certificates
// and as the client; with one, a kubeconfig whose certificate is still
// valid is kept, else it is written anew pointing at the store's current
// certificate, which the bootstrap credentials request.
func (c *Credentials) loadClientConfig() (certConfig, clientConfig *rest.Config, err error) {
	if c.cfg.BootstrapKubeconfig == "" || clientConfigStillValid(c.cfg.Kubeconfig) {
		rc, err := clientcmd.BuildConfigFromFlags("", c.cfg.Kubeconfig)
		if err != nil {
			return nil, nil, fmt.Errorf("kubeconfig %s: %w", c.cfg.Kubeconfig, err)
		}
		return rc, rest.CopyConfig(rc), nil
	}
	boot, err := clientcmd.BuildConfigFromFlags("", c.cfg.BootstrapKubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap kubeconfig %s: %w", c.cfg.BootstrapKubeconfig, err)
	}
	clientConfig = rest.AnonymousClientConfig(boot)
	pem := filepath.Join(c.cfg.CertDir, "kubelet-client-current.pem")
	clientConfig.CertFile, clientConfig.KeyFile = pem, pem
	if err := writeKubeconfig(boot, c.cfg.Kubeconfig, pem); err != nil {
		return nil, nil, err
	}
	c.logger.Info("TLS bootstrap: requesting the node's client certificate with the bootstrap kubeconfig",
		"bootstrapKubeconfig", c.cfg.BootstrapKubeconfig, "kubeconfig", c.cfg.Kubeconfig, "certDir", c.cfg.CertDir)
	return boot, clientConfig, nil
}

// clientConfigStillValid is the kubelet's isClientConfigStillValid: the
// kubeconfig exists, loads, and holds client certificates none of which has
// expired.
func clientConfigStillValid(path string) bool {
	if _, err := os.Stat(path); err != nil {
		return false
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return false
	}
	tc, err := rc.TransportConfig()
	if err != nil {
		return false
	}
	// Fills tc.TLS.CertData from the files.
	if _, err := transport.TLSConfigFor(tc); err != nil {
		return false
	}
	certs, err := certutil.ParseCertsPEM(tc.TLS.CertData)
	if err != nil || len(certs) == 0 {
		return false
	}
	now := time.Now()
	for _, cert := range certs {
		if now.After(cert.NotAfter) {
			return false
		}
	}
	return true
}

// writeKubeconfig is the kubelet's writeKubeconfigFromBootstrapping: the
// bootstrap kubeconfig's cluster, and the certificate and key in pem; written
// whole or not at all (kubeadm join waits for it to load).
func writeKubeconfig(boot *rest.Config, path, pem string) error {
	caFile, caData := boot.CAFile, []byte(nil)
	if caFile == "" {
		caData = boot.CAData
	}
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"default-cluster": {
			Server:                   boot.Host,
			InsecureSkipTLSVerify:    boot.Insecure,
			CertificateAuthority:     caFile,
			CertificateAuthorityData: caData,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"default-auth": {
			ClientCertificate: pem,
			ClientKey:         pem,
		}},
		Contexts: map[string]*clientcmdapi.Context{"default-context": {
			Cluster:   "default-cluster",
			AuthInfo:  "default-auth",
			Namespace: "default",
		}},
		CurrentContext: "default-context",
	})
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := atomicfile.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data)
}

// checkCertDir makes the certificate directory (0700 when new: it holds
// the node's key) and refuses one whose store symlinks lead out of it:
// client-go's file store reads and replaces them as they are.
func checkCertDir(dir string) error {
	if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cert dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("cert dir: %w", err)
	}
	for _, name := range []string{"kubelet-client-current.pem", "kubelet-client-updated.pem"} {
		p := filepath.Join(abs, name)
		target, err := os.Readlink(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			// Not a symlink: the store refuses it with its own error.
			continue
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(abs, target)
		}
		if filepath.Dir(filepath.Clean(target)) != abs {
			return fmt.Errorf("cert dir: %s points to %s, outside %s", p, target, abs)
		}
		fi, err := os.Lstat(target)
		if err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("cert dir: %s points to %s, not a regular file", p, target)
		}
	}
	return nil
}

// csrRequestTimeout bounds each CSR request but the watch of its answer,
// which the certificate manager bounds (15 minutes, then a new request).
// A var for the tests.
var csrRequestTimeout = 30 * time.Second

// newCSRClient is the certificate manager's client of
// certificates.k8s.io/v1 CertificateSigningRequests.
func newCSRClient(cfg *rest.Config) (certificate.CSRClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "staticpodd-certificate-manager"
	c, err := groupClient(cfg, certificatesv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return boundedCSRs{restCSRs{typed[certificatesv1.CertificateSigningRequest]{c, runtime.NewParameterCodec(clientScheme()), "", "certificatesigningrequests"}}}, nil
}

// boundedCSRs ends each request that is not a watch when csrRequestTimeout
// has passed, its answer read or not, with the REST client's tries again
// and its waits between them: the certificate manager's requests carry a
// context that ends only when it stops, so a server that never answers, or
// answers 429 or 5xx with a Retry-After of hours (which client-go's REST
// client sleeps, up to 10 times), would hold its rotation loop for good.
// Not cfg.Timeout: it would cut the watch too, which client-go's reflector
// would then start again and again.
type boundedCSRs struct{ restCSRs }

func (b boundedCSRs) Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, csrRequestTimeout)
	defer cancel()
	return b.restCSRs.Create(ctx, csr, opts)
}

func (b boundedCSRs) Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, csrRequestTimeout)
	defer cancel()
	return b.restCSRs.Get(ctx, name, opts)
}

func (b boundedCSRs) List(ctx context.Context, opts metav1.ListOptions) (*certificatesv1.CertificateSigningRequestList, error) {
	ctx, cancel := context.WithTimeout(ctx, csrRequestTimeout)
	defer cancel()
	return b.restCSRs.List(ctx, opts)
}

// rotatingTransport gives rc the kubelet's rotating transport
// (pkg/kubelet/certificate.UpdateTransport): TLS with the client
// certificate the manager has at each handshake, over a dialer whose
// connections watchCertificate closes when it changes.
func rotatingTransport(rc *rest.Config, m certificate.Manager) (*connrotation.Dialer, error) {
	tlsConfig, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, fmt.Errorf("TLS of the API server's client: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert := m.Current(); cert != nil {
			return cert, nil
		}
		// None yet: the handshake goes on without, and the API server
		// answers 401 until the CSR is approved.
		return &tls.Certificate{}, nil
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	rc.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	// The transport holds the TLS settings now; rest refuses both.
	rc.TLSClientConfig = rest.TLSClientConfig{}
	return d, nil
}

// Periods of watchCertificate: every second until there is a certificate,
// then every 10 seconds, as the kubelet's updateTransport.
const (
	certificateWaitPeriod  = time.Second
	certificateCheckPeriod = 10 * time.Second
)

// watchCertificate closes the transport's connections when the manager's
// certificate changes, so that the next requests present the new one, and
// tells the mirror's health while there is none. With rotation off
// (bootstrap alone), it stops the manager once it has the certificate, as
// the kubelet requests one then (LoadClientCert) and never again.
func (c *Credentials) watchCertificate(m certificate.Manager, d *connrotation.Dialer) {
	defer close(c.done)
	last := m.Current()
	c.logCertificate(last, "client certificate")
	for {
		period := certificateCheckPeriod
		if last == nil {
			period = certificateWaitPeriod
		}
		t := time.NewTimer(period)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
		cur := m.Current()
		c.mu.Lock()
		report := c.report
		c.mu.Unlock()
		if report != nil {
			var err error
			if cur == nil {
				err = fmt.Errorf("no valid client certificate in %s: waiting for the certificate signing request (signer %s) to be approved and issued",
					c.cfg.CertDir, certificatesv1.KubeAPIServerClientKubeletSignerName)
			}
			report("client certificate", err)
		}
		if cur == nil || cur == last {
			continue
		}
		last = cur
		c.logCertificate(cur, "client certificate changed: closing the connections to use it")
		d.CloseAll()
		if !c.cfg.Rotate {
			m.Stop()
		}
	}
}

func (c *Credentials) logCertificate(cert *tls.Certificate, msg string) {
	if cert == nil || cert.Leaf == nil {
		return
	}
	c.logger.Info(msg, "subject", cert.Leaf.Subject.String(), "serial", cert.Leaf.SerialNumber.String(),
		"notAfter", cert.Leaf.NotAfter.UTC().Format(time.RFC3339), "rotate", c.cfg.Rotate)
}
