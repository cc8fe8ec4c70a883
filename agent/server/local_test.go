package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// Local serves its handler to the connections Dial makes, upgraded ones
// too, and refuses new ones once closed.
func TestLocal(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	mux.HandleFunc("POST /upgrade", func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		rw.WriteString("echo " + line)
		rw.Flush()
	})
	l := NewLocal(mux)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return l.Dial(ctx) }}}
	resp, err := c.Get("http://local/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("GET /hello = %q", body)
	}

	conn, err := l.Dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /upgrade HTTP/1.1\r\nHost: local\r\nConnection: Upgrade\r\nUpgrade: test\r\nContent-Length: 0\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	io.WriteString(conn, "ping\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo ping\n" {
		t.Errorf("upgraded connection answered %q, %v", line, err)
	}

	c.CloseIdleConnections()
	if err := l.Close(); err != nil {
		t.Error(err)
	}
	if _, err := l.Dial(t.Context()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Dial after Close: %v", err)
	}
}
