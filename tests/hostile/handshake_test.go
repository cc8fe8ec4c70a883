package hostile

import (
	"bufio"
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
	const perAddr, each = 8, 136
	nodeAPIUnderFlood(t, "half-open handshakes", 2*(each-perAddr), func(addr string) {
		for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
			halfOpenFrom(t, addr, src, each)
		}
	})
}

// Connections that finish their TLS handshake without a client certificate,
// which the node API lets anyone do, and then stay open, idle or kept alive
// after a 401, 64 from each of two addresses, do not take the cap from an
// authorized client either: each address has at most 8 connections with no
// request authorized yet.
func TestHostileNodeAPIHandshakenWithoutCredentialsFlood(t *testing.T) {
	t.Parallel()
	const perAddr, each = 8, 64
	nodeAPIUnderFlood(t, "handshaken connections without credentials", 2*(each-perAddr), func(addr string) {
		for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
			handshakenFrom(t, addr, src, each)
		}
	})
}

// handshakenFrom opens n connections to addr from the loopback address src
// that finish their TLS handshake without a certificate; every other one
// then sends a request without credentials and reads its 401. Connections
// the daemon refuses are skipped; the others close at the end of t.
func handshakenFrom(t *testing.T, addr, src string, n int) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	for i := range n {
		raw, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d from %s: %v", i, src, err)
		}
		t.Cleanup(func() { raw.Close() })
		c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) // as an attacker would
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if c.Handshake() != nil || i%2 != 0 {
			continue
		}
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: node\r\n\r\n")); err != nil {
			continue
		}
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a request without credentials from %s: %s", src, resp.Status)
			}
		}
	}
}

// nodeAPIUnderFlood starts the daemon with a client CA, runs flood against
// its node API, and checks that an authorized /healthz answers within 2 s
// and that /metrics counts refused connections.
func nodeAPIUnderFlood(t *testing.T, what string, refused int, flood func(addr string)) {
	t.Helper()
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
	// The node API is served, with the serving certificate it makes, after
	// READY=1 (Start's return): the test waits for that certificate.
	crt := filepath.Join(d.RootDir, "pki", "kubelet.crt")
	d.Eventually(30*time.Second, "the node API serves", func() error {
		if _, err := os.Stat(crt); err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	client := func(timeout time.Duration) *http.Client {
		pemBytes, err := os.ReadFile(crt)
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

	flood(addr)
	start := time.Now()
	if _, err := get(client(2*time.Second), "/healthz"); err != nil {
		t.Fatalf("authorized /healthz under %s: %v (after %s)", what, err, time.Since(start))
	}
	t.Logf("authorized /healthz under %s from 2 addresses: %s", what, time.Since(start))
	metrics, err := get(client(10*time.Second), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^staticpodd_node_api_tls_handshakes_refused_total (\d+)$`).FindStringSubmatch(metrics)
	if m == nil || m[1] != fmt.Sprint(refused) {
		t.Errorf("handshakes refused: %v, want %d", m, refused)
	}
}
