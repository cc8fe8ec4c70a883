package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
)

// TLS is the node API's TLS setup: tlsCertFile, tlsPrivateKeyFile,
// tlsMinVersion, tlsCipherSuites and authentication.x509.clientCAFile.
type TLS struct {
	CertFile, KeyFile string // both or neither; neither: a self-signed one under PKIDir
	PKIDir            string // --cert-dir, default <root-dir>/pki
	Host              string // the node's name, in a self-signed certificate
	MinVersion        uint16
	CipherSuites      []uint16
	// RequestClientCerts asks clients for a certificate, which Auth
	// verifies against the client CAs (authentication.x509.clientCAFile).
	RequestClientCerts bool
	// Logger tells of reloads of the certificate files.
	Logger *slog.Logger
}

// Self-signed certificate files, named as the kubelet names them.
const (
	selfSignedCert = "kubelet.crt"
	selfSignedKey  = "kubelet.key"
)

// Config returns the server's tls.Config. Without CertFile it uses the
// certificate under PKIDir, making it first when there is none, as the
// kubelet's InitializeTLS does (cert.GenerateSelfSignedCertKey): a CA valid
// one year and a serving certificate for Host, signed by it. Either is read
// again when its files change (the kubelet's
// ReloadKubeletServerCertificateFile, on by default).
func (t TLS) Config() (*tls.Config, error) {
	certFile, keyFile := t.CertFile, t.KeyFile
	if certFile == "" && keyFile == "" {
		certFile, keyFile = filepath.Join(t.PKIDir, selfSignedCert), filepath.Join(t.PKIDir, selfSignedKey)
		if err := ensureSelfSigned(certFile, keyFile, t.Host); err != nil {
			return nil, err
		}
	} else if certFile == "" || keyFile == "" {
		return nil, errors.New("tlsCertFile and tlsPrivateKeyFile: give both or neither")
	}
	logger := t.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	getCert, err := certReloader(certFile, keyFile, logger)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		GetCertificate: getCert,
		MinVersion:     t.MinVersion,
		CipherSuites:   t.CipherSuites,
		// HTTP/1.1 only: every endpoint is a request or a stream of bytes,
		// and h2 would bring its own limits to bound.
		NextProtos: []string{"http/1.1"},
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	if t.RequestClientCerts {
		// As the kubelet: ask for a certificate but verify none in the
		// handshake; Auth verifies it against the client CAs as they are
		// now, and a certificate that fails is a 401, a token beside it
		// still heard.
		cfg.ClientAuth = tls.RequestClientCert
	}
	return cfg, nil
}

// LoadClientCAs reads a PEM bundle of CA certificates.
func LoadClientCAs(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("authentication.x509.clientCAFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("authentication.x509.clientCAFile %s: no PEM certificate in it", path)
	}
	return pool, nil
}

// ensureSelfSigned writes a CA and a serving certificate for host when
// certFile or keyFile is missing; the key (0600) is written first and the
// certificate, whose presence means both are whole, last.
func ensureSelfSigned(certFile, keyFile, host string) error {
	_, errC := os.Stat(certFile)
	_, errK := os.Stat(keyFile)
	if errC == nil && errK == nil {
		return nil
	}
	if (errC != nil && !errors.Is(errC, fs.ErrNotExist)) || (errK != nil && !errors.Is(errK, fs.ErrNotExist)) {
		return fmt.Errorf("self-signed certificate: %w", errors.Join(errC, errK))
	}
	// Its name durable too: else a power cut could take the directory
	// with the key and certificate fsynced in it.
	if err := atomicfile.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(certFile), err)
	}
	certPEM, keyPEM, err := selfSigned(host, time.Now())
	if err != nil {
		return fmt.Errorf("generate self-signed certificate for %s: %w", host, err)
	}
	if err := writeFileSync(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return writeFileSync(certFile, certPEM, 0o644)
}

// selfSigned follows client-go's cert.GenerateSelfSignedCertKey: a CA named
// <host>-ca@<unix time> and a serving certificate for host (and localhost,
// 127.0.0.1 and ::1 when host is not an IP), the CA after it in the bundle.
// ECDSA P-256 instead of RSA 2048: as strong, smaller and faster.
func selfSigned(host string, now time.Time) (certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		return n
	}
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", host, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", host, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if ip := net.ParseIP(host); ip != nil {
		leaf.IPAddresses = []net.IP{ip}
	} else {
		leaf.DNSNames = []string{host, "localhost"}
		leaf.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func writeFileSync(path string, b []byte, mode os.FileMode) error {
	if err := atomicfile.WriteMode(path, b, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
