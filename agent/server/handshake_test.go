package server

import (
	"crypto/tls"
	"net"
	"net/http"
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
