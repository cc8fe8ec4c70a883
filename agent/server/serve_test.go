package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// short are limits that run out within a test; the daemon uses DefaultLimits.
func short(maxConns int) Limits {
	return Limits{
		MaxConns:          maxConns,
		ReadHeaderTimeout: 200 * time.Millisecond,
		ReadTimeout:       200 * time.Millisecond,
		WriteTimeout:      200 * time.Millisecond,
		IdleTimeout:       200 * time.Millisecond,
		MaxHeaderBytes:    4 << 10,
	}
}

// patience is how long a test waits for what must happen; the limits above
// make it happen in a fraction of it.
const patience = 10 * time.Second

// serveOn runs Serve on a new listener on network ("tcp" or "unix") until the
// test ends, and returns the address to dial.
func serveOn(t *testing.T, network string, h http.Handler, lim Limits) string {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "staticpodd.sock")
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, h, lim, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// client is one raw connection that speaks HTTP/1.1 with keep-alive.
type client struct {
	net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, network, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout(network, addr, patience)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{Conn: c, br: bufio.NewReader(c)}
}

func (c *client) send(path string) error {
	_, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: staticpodd\r\n\r\n", path)
	return err
}

// response reads one response within d and returns its body.
func (c *client) response(d time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func (c *client) get(t *testing.T, path string) string {
	t.Helper()
	if err := c.send(path); err != nil {
		t.Fatal(err)
	}
	body, err := c.response(patience)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return body
}

// closedByServer waits for the server to close c and says how it ended: nil
// when it did, an error when c stayed open for the whole patience.
func (c *client) closedByServer() error {
	c.SetReadDeadline(time.Now().Add(patience))
	_, err := io.Copy(io.Discard, c.br)
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, syscall.ECONNRESET):
		return nil // EOF, or a reset for unread data
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("still open after %s", patience)
	}
	return err
}

// The report this guards against: 2000 idle keep-alive connections stayed
// open as long as their clients liked.
func TestIdleConnectionsAreClosed(t *testing.T) {
	addr := serveOn(t, "tcp", ReadOnly(testAgent, nil, logger()), short(0))
	var conns []*client
	for range 50 {
		c := dial(t, "tcp", addr)
		if body := c.get(t, "/healthz"); body != "ok" {
			t.Fatalf("/healthz = %q", body)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		if err := c.closedByServer(); err != nil {
			t.Errorf("idle connection %d: %v", i, err)
		}
	}
}

// A client that sends its headers slowly, or never finishes them, is cut off
// after ReadHeaderTimeout however much it trickles.
func TestSlowHeadersAreCut(t *testing.T) {
	addr := serveOn(t, "tcp", ReadOnly(testAgent, nil, logger()), short(0))
	for _, tc := range []struct {
		name    string
		sent    string
		trickle bool
	}{
		{"nothing sent", "", false},
		{"half the headers", "GET /pods HTTP/1.1\r\nHost: staticpodd\r\n", false},
		{"a byte at a time", "GET /pods HTTP/1.1\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, "tcp", addr)
			if _, err := io.WriteString(c, tc.sent); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			if tc.trickle {
				go func() {
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := io.WriteString(c, "X"); err != nil {
								return
							}
						}
					}
				}()
			}
			if err := c.closedByServer(); err != nil {
				t.Error(err)
			}
		})
	}
}

// A client that asks and then does not read has its connection closed after
// WriteTimeout: the handler's writes fail instead of blocking for ever.
func TestUnreadResponseIsCut(t *testing.T) {
	writeErr := make(chan error, 1)
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
	})
	addr := serveOn(t, "tcp", endless, short(0))
	c := dial(t, "tcp", addr)
	if err := c.send("/big"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-writeErr:
		t.Logf("the handler's write failed: %v", err)
	case <-time.After(patience):
		t.Fatalf("the handler still writes to a client that does not read after %s", patience)
	}
}

// Connections beyond MaxConns are not served until one of those served closes.
func TestConnectionsBeyondTheCapWait(t *testing.T) {
	addr := serveOn(t, "tcp", ReadOnly(testAgent, nil, logger()), DefaultLimits(3))
	var served []*client
	for range 3 {
		c := dial(t, "tcp", addr)
		c.get(t, "/healthz")
		served = append(served, c) // idle, kept alive
	}
	next := dial(t, "tcp", addr) // the kernel completes the handshake
	if err := next.send("/healthz"); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if body, err := next.response(300 * time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a 4th connection with a cap of 3 was answered: %q, %v", body, err)
	}
	served[0].Close()
	if body, err := next.response(patience); err != nil || body != "ok" {
		t.Errorf("after one connection closed, the waiting one got %q, %v; want ok", body, err)
	}
}

// The CLI socket has a cap of its own: it answers while the read-only port
// is full and clients wait in its backlog.
func TestCLISocketAnswersWhileReadOnlyPortIsFull(t *testing.T) {
	tcp := serveOn(t, "tcp", ReadOnly(testAgent, nil, logger()), DefaultLimits(2))
	sock := serveOn(t, "unix", CLI(testAgent, logger()), DefaultLimits(2))
	for i := range 20 {
		c := dial(t, "tcp", tcp)
		if err := c.send("/pods"); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if _, err := c.response(patience); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 3 { // more than the CLI socket's own cap, one after the other
		c := dial(t, "unix", sock)
		if body := c.get(t, "/healthz"); body != "ok" {
			t.Errorf("CLI socket /healthz = %q", body)
		}
		c.Close()
	}
}

// `logs -f` outlives every timeout of the CLI socket: a line written after
// they passed still reaches the client.
func TestFollowedLogOutlivesTheTimeouts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(file, []byte("2026-11-30T06:00:00Z stdout F first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lim := short(4)
	// Well after the follow's deadlines passed: a follow they cut would
	// have ended by then.
	lim.IdleTimeout = lim.WriteTimeout + time.Second
	sock := serveOn(t, "unix", CLI(fakeAgent{logFile: file}, logger()), lim)
	follow := dial(t, "unix", sock)
	if err := follow.send("/containerLogs/default/web-node1/main?follow=true"); err != nil {
		t.Fatal(err)
	}
	follow.SetReadDeadline(time.Now().Add(patience))
	resp, err := http.ReadResponse(follow.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer follow.Close() // not resp.Body.Close, which reads the stream to its end
	lines := bufio.NewReader(resp.Body)
	if line, err := lines.ReadString('\n'); line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	// A connection that goes idle now is closed when IdleTimeout has passed,
	// which is after the follow's read and write deadlines would have.
	idle := dial(t, "unix", sock)
	idle.get(t, "/healthz")
	if err := idle.closedByServer(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("2026-11-30T06:00:01Z stdout F later\n")
	f.Close()
	if line, err := lines.ReadString('\n'); line != "later\n" {
		t.Errorf("after the timeouts the stream gave %q, %v; want \"later\\n\"", line, err)
	}
}

// Every listener gets every limit: no zero, which net/http reads as "none".
func TestDefaultLimitsSetEverything(t *testing.T) {
	for _, n := range []int{ReadOnlyMaxConns, CLIMaxConns} {
		lim := reflect.ValueOf(DefaultLimits(n))
		for i := range lim.NumField() {
			if lim.Field(i).IsZero() {
				t.Errorf("DefaultLimits(%d).%s is zero", n, lim.Type().Field(i).Name)
			}
		}
	}
}

func TestFitFiles(t *testing.T) {
	for _, tc := range []struct {
		want   int
		nofile uint64
		got    int
	}{
		{ReadOnlyMaxConns, 1 << 20, ReadOnlyMaxConns},
		{ReadOnlyMaxConns, 1024, 128},
		{ReadOnlyMaxConns, 64, 8},
		{CLIMaxConns, 64, 8},
		{CLIMaxConns, 4, 1},
		{CLIMaxConns, ^uint64(0), CLIMaxConns}, // RLIM_INFINITY
	} {
		if got := DefaultLimits(tc.want).FitFiles(tc.nofile).MaxConns; got != tc.got {
			t.Errorf("cap %d under %d open files = %d, want %d", tc.want, tc.nofile, got, tc.got)
		}
	}
}

// Too much header is refused, not buffered.
func TestHeadersOverTheLimitAreRefused(t *testing.T) {
	addr := serveOn(t, "tcp", ReadOnly(testAgent, nil, logger()), DefaultLimits(0))
	c := dial(t, "tcp", addr)
	fmt.Fprintf(c, "GET /pods HTTP/1.1\r\nHost: staticpodd\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 128<<10))
	c.SetReadDeadline(time.Now().Add(patience))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
}
