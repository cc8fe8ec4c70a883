package source

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// A manifest URL's server decides the reason phrase of its status line: the
// error that says the answer was not 200 keeps podspec.MaxEventMessage of it.
func TestFetchStatusBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			conn.Read(buf)
			conn.Write([]byte("HTTP/1.1 500 " + strings.Repeat("r", 60<<10) + "\r\nContent-Length: 0\r\n\r\n"))
			conn.Close()
		}
	}()
	_, err = NewClient("", 5*time.Second).Fetch(context.Background(), "http://"+ln.Addr().String()+"/pods", nil)
	if err == nil || !strings.HasPrefix(err.Error(), "HTTP 500 rrr") {
		t.Fatalf("err = %.80v, want HTTP 500 and the reason", err)
	}
	if n := len(err.Error()); n > podspec.MaxEventMessage+16 {
		t.Errorf("error of %d bytes, want about %d", n, podspec.MaxEventMessage)
	}
}
