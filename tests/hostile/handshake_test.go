package hostile

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
	"regexp"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// clientCA writes a CA to dir/name.crt and returns a client certificate for
// user issued by it.
func clientCA(t *testing.T, dir, name, user string) (caFile string, cert tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	caFile = filepath.Join(dir, name+".crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: user},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// halfOpenFrom opens n connections to addr from the loopback address src
// that never finish a TLS handshake (every fourth sends the start of a
// ClientHello, the others nothing); they close at the end of t.
func halfOpenFrom(t *testing.T, addr, src string, n int) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	for i := range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d from %s: %v", i, src, err)
		}
		t.Cleanup(func() { c.Close() })
		if i%4 == 0 {
			c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03})
		}
	}
}

// Connections that never finish their TLS handshake, more than the node
// API's cap of 128 from each of two addresses, no longer keep an authorized
// client from /healthz: it answers within 2 s, before the 5 s handshake
// deadline could have freed a slot, and /metrics counts the connections
// refused beyond 8 in progress per address.
func TestHostileNodeAPIHandshakeFlood(t *testing.T) {
	t.Parallel()
	d := testdaemon.New(t)
	caFile, cert := clientCA(t, d.Dir, "flood-ca", "admin")
	f, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "authentication: {x509: {clientCAFile: %s}}\nauthorization: {mode: AlwaysAllow}\n", caFile)
	f.Close()
	d.Start()
	addr := fmt.Sprintf("127.0.0.1:%d", d.NodePort)
	client := func(timeout time.Duration) *http.Client {
		pemBytes, err := os.ReadFile(filepath.Join(d.RootDir, "pki", "kubelet.crt"))
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pemBytes)
		return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: d.Name, Certificates: []tls.Certificate{cert}}}}
	}
	get := func(cl *http.Client, path string) (string, error) {
		resp, err := cl.Get("https://" + addr + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", resp.Status, b)
		}
		return string(b), err
	}
	d.Eventually(30*time.Second, "the node API answers", func() error {
		_, err := get(client(5*time.Second), "/healthz")
		return err
	})

	const perAddr, each = 8, 136
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		halfOpenFrom(t, addr, src, each)
	}
	start := time.Now()
	if _, err := get(client(2*time.Second), "/healthz"); err != nil {
		t.Fatalf("authorized /healthz under %d half-open handshakes: %v (after %s)", 2*each, err, time.Since(start))
	}
	t.Logf("authorized /healthz under %d half-open handshakes from 2 addresses: %s", 2*each, time.Since(start))
	metrics, err := get(client(10*time.Second), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^staticpodd_node_api_tls_handshakes_refused_total (\d+)$`).FindStringSubmatch(metrics)
	if m == nil || m[1] != fmt.Sprint(2*(each-perAddr)) {
		t.Errorf("handshakes refused: %v, want %d", m, 2*(each-perAddr))
	}
}
