package server

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// halfOpen opens n TCP connections to addr from the loopback address src
// that never finish a TLS handshake: every partial-th sends the first bytes
// of a ClientHello, the others nothing. Each is closed at the end of t.
func halfOpen(t *testing.T, addr, src string, n, partial int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: patience}
	conns := make([]net.Conn, 0, n)
	for i := range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("half-open connection %d from %s: %v", i, src, err)
		}
		t.Cleanup(func() { c.Close() })
		if partial > 0 && i%partial == 0 {
			// A TLS record header announcing a 512-byte handshake message,
			// and the start of a ClientHello.
			c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03})
		}
		conns = append(conns, c)
	}
	return conns
}

// floodTimeout is the authorized client's whole budget under the flood: well
// under the handshake deadline, so that no half-open connection has been
// timed out, and its slot freed, by the time the request must be answered.
const floodTimeout = 2 * time.Second

// Two addresses that hold the node API's whole connection cap in TLS
// handshakes they never finish (the way two reconnecting clients did) no
// longer keep an authorized client from /healthz: each address has at most
// MaxHandshakesPerAddr handshakes in progress, the excess is closed at once,
// and only handshaken connections count against the cap.
func TestNodeAPIHandshakeFlood(t *testing.T) {
	c := newCA(t, "ca")
	lim := DefaultLimits(NodeMaxConns)
	if floodTimeout >= lim.HandshakeTimeout {
		t.Fatalf("the client's %s must be shorter than the handshake deadline %s", floodTimeout, lim.HandshakeTimeout)
	}
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{ClientCAs: StaticCAs(c.pool)}, t.TempDir(), lim)
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		halfOpen(t, addr, src, NodeMaxConns+8, 4)
	}
	cl := tlsClient(serving, c.client(t, "admin"))
	cl.Timeout = floodTimeout
	start := time.Now()
	resp, err := cl.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("authorized /healthz under %d half-open handshakes from 2 addresses: %v (after %s)", 2*(NodeMaxConns+8), err, time.Since(start))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("authorized /healthz = %d", resp.StatusCode)
	}
	// The listener took the half-open connections in order, before the
	// client's: all but MaxHandshakesPerAddr of each address were refused.
	if got, want := lim.HandshakesRefused.Load(), uint64(2*(NodeMaxConns+8-lim.MaxHandshakesPerAddr)); got != want {
		t.Errorf("%d connections refused, want %d", got, want)
	}
}

// The bound is per client address: each of two addresses gets
// MaxHandshakesPerAddr handshakes in progress, and only its own next
// connection is refused, closed at once without a byte.
func TestHandshakesBoundedPerAddress(t *testing.T) {
	c := newCA(t, "ca")
	lim := DefaultLimits(NodeMaxConns)
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{ClientCAs: StaticCAs(c.pool)}, t.TempDir(), lim)
	per := lim.MaxHandshakesPerAddr
	for i, src := range []string{"127.0.0.2", "127.0.0.3"} {
		conns := halfOpen(t, addr, src, per+1, 0)
		// The excess connection is closed by the server, unread.
		last := conns[per]
		last.SetReadDeadline(time.Now().Add(patience))
		if n, err := last.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
			t.Errorf("connection %d from %s: read %d bytes, %v; want it closed", per+1, src, n, err)
		}
		if got := lim.HandshakesRefused.Load(); got != uint64(i+1) {
			t.Errorf("after %d connections from %s: %d refused in all, want %d", per+1, src, got, i+1)
		}
	}
	// The first ones of each address are still in their handshake: one
	// finishes it.
	first := tls.Client(halfOpenFirst(t, addr), &tls.Config{RootCAs: serving, ServerName: "node1", Certificates: []tls.Certificate{c.client(t, "admin")}})
	first.SetDeadline(time.Now().Add(patience))
	if err := first.Handshake(); err != nil {
		t.Errorf("a handshake from a third address: %v", err)
	}
	first.Close()
}

func halfOpenFirst(t *testing.T, addr string) net.Conn {
	t.Helper()
	return halfOpen(t, addr, "127.0.0.4", 1, 0)[0]
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// handshakenFrom opens n connections to addr from the loopback address src
// that finish their TLS handshake without a client certificate, as anyone
// can, and then hold it: every other one sends a request without
// credentials, reads its 401 and stays open (keep-alive), the others send
// nothing. It returns how many finished the handshake; each is closed at
// the end of t.
func handshakenFrom(t *testing.T, addr, src string, n int, serving *x509.CertPool) int {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: patience}
	done := 0
	for i := range n {
		raw, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d from %s: %v", i, src, err)
		}
		t.Cleanup(func() { raw.Close() })
		c := tls.Client(raw, &tls.Config{RootCAs: serving, ServerName: "node1"})
		c.SetDeadline(time.Now().Add(patience))
		if c.Handshake() != nil {
			continue // refused: closed unread
		}
		done++
		if i%2 == 0 {
			if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: node1\r\n\r\n")); err != nil {
				continue
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				continue // not served: waits for a slot
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a request without credentials from %s: %d", src, resp.StatusCode)
			}
		}
	}
	return done
}

// Clients without credentials that finish their TLS handshake, which a
// server that only requests a client certificate lets anyone do, and then
// hold the connection (idle, or kept alive after a 401) count against their
// address's bound until a request of theirs is authorized: two addresses do
// not take the cap from an authorized client, as they did with half-open
// handshakes before.
func TestNodeAPIHandshakenWithoutCredentialsFlood(t *testing.T) {
	c := newCA(t, "ca")
	lim := DefaultLimits(NodeMaxConns)
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{ClientCAs: StaticCAs(c.pool)}, t.TempDir(), lim)
	held := 0
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		held += handshakenFrom(t, addr, src, NodeMaxConns/2, serving)
	}
	cl := tlsClient(serving, c.client(t, "admin"))
	cl.Timeout = floodTimeout
	start := time.Now()
	resp, err := cl.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("authorized /healthz with %d handshaken connections without credentials from 2 addresses: %v (after %s)", held, err, time.Since(start))
	}
	resp.Body.Close()
	if got, want := lim.HandshakesRefused.Load(), uint64(2*(NodeMaxConns/2-lim.MaxHandshakesPerAddr)); got != want {
		t.Errorf("%d connections refused, want %d", got, want)
	}
}

// An address's authorized connections do not count against its bound: a
// proxy such as the API server holds many at once from one address.
func TestNodeAPIAuthorizedConnectionsNotBoundedPerAddress(t *testing.T) {
	c := newCA(t, "ca")
	lim := DefaultLimits(NodeMaxConns)
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{ClientCAs: StaticCAs(c.pool)}, t.TempDir(), lim)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}, Timeout: patience}
	cfg := &tls.Config{RootCAs: serving, ServerName: "node1", Certificates: []tls.Certificate{c.client(t, "admin")}}
	for i := range 3 * lim.MaxHandshakesPerAddr {
		conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
		if err != nil {
			t.Fatalf("authorized connection %d: %v", i, err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(patience))
		if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: node1\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("authorized connection %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("authorized connection %d: %d", i, resp.StatusCode)
		}
	}
	if got := lim.HandshakesRefused.Load(); got != 0 {
		t.Errorf("%d authorized connections refused", got)
	}
}

// Every way a connection ends gives back what it held: after handshakes that
// fail (garbage, a client gone halfway, a deadline), connections refused
// per address, handshaken ones that close unauthorized and authorized ones,
// nothing is left counted in progress or against an address.
func TestHandshakeCountsReturnToZero(t *testing.T) {
	c := newCA(t, "ca")
	pki := t.TempDir()
	tc, err := TLS{PKIDir: pki, Host: "node1", RequestClientCerts: true}.Config()
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(filepath.Join(pki, selfSignedCert))
	if err != nil {
		t.Fatal(err)
	}
	serving := x509.NewCertPool()
	serving.AppendCertsFromPEM(pemBytes)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := DefaultLimits(16)
	lim.HandshakeTimeout = 200 * time.Millisecond
	lim.MaxHandshakes = 64
	l := newHandshakeListener(raw, tc, lim, logger())
	auth := &Auth{ClientCAs: StaticCAs(c.pool)}
	srv := &http.Server{Handler: auth.guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), logger()), ConnContext: withConn}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	addr := raw.Addr().String()
	request := func(cert ...tls.Certificate) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: patience}, "tcp", addr, &tls.Config{RootCAs: serving, ServerName: "node1", Certificates: cert})
		if err != nil {
			return // refused
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(patience))
		conn.Write([]byte("GET / HTTP/1.1\r\nHost: node1\r\n\r\n"))
		if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
			resp.Body.Close()
		}
	}
	admin := c.client(t, "admin")
	for range 5 {
		for _, conn := range halfOpen(t, addr, "127.0.0.2", 2*lim.MaxHandshakesPerAddr, 2) {
			conn.Write([]byte("garbage that is no TLS record at all"))
		}
		for _, conn := range halfOpen(t, addr, "127.0.0.3", 2*lim.MaxHandshakesPerAddr, 3) {
			conn.Close() // gone halfway
		}
		halfOpen(t, addr, "127.0.0.4", lim.MaxHandshakesPerAddr, 0) // left to the deadline
		for range 4 {
			request()
			request(admin)
		}
	}
	deadline := time.Now().Add(patience)
	for {
		l.mu.Lock()
		addrs, pending := len(l.byAddr), len(l.pending)
		l.mu.Unlock()
		// One token is the accept loop's own, taken before it waits in
		// Accept.
		if addrs == 0 && pending == 1 && len(l.slots) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after every connection ended: %d addresses counted, %d handshakes in progress, %d slots held", addrs, pending-1, len(l.slots))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lim.HandshakesRefused.Load() == 0 {
		t.Errorf("no connection refused: the bound per address was not reached")
	}
}
