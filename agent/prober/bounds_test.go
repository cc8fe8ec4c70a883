package prober

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestGRPCProbeBounds: a gRPC server decides the status message and may
// make it, its headers, its trailers or its body as long as it likes. The
// probe keeps maxOutput of a message, and refuses headers or trailers past
// maxHeaders before it holds them.
func TestGRPCProbeBounds(t *testing.T) {
	const huge = 8 << 20
	var served atomic.Int64
	answer := func(w http.ResponseWriter, inTrailers bool, msg string) {
		w.Header().Set("Content-Type", "application/grpc")
		if inTrailers {
			w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
			w.Write(grpcFrame([]byte{0x08, 0x01}))
		}
		w.Header().Set("Grpc-Status", "2")
		w.Header().Set("Grpc-Message", msg)
	}
	// The service asked for names the answer.
	mux := http.NewServeMux()
	mux.HandleFunc("/grpc.health.v1.Health/Check", func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		body, _ := io.ReadAll(r.Body)
		switch string(body[min(7, len(body)):]) {
		case "long":
			answer(w, false, strings.Repeat("m", maxOutput+2<<10))
		case "huge-header":
			answer(w, false, strings.Repeat("m", huge))
		case "huge-trailer":
			answer(w, true, strings.Repeat("m", huge))
		case "huge-body":
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			frame := make([]byte, 5, 5+huge)
			frame[1] = 0x80 // a message of 8 MiB
			w.Write(append(frame, make([]byte, huge)...))
			w.Header().Set("Grpc-Status", "0")
		}
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	for _, tc := range []struct {
		service string
		want    string // in the output
	}{
		{"long", "code = 2 desc = " + strings.Repeat("m", maxOutput)},
		{"huge-header", "error: failed to connect service"},
		{"huge-trailer", "error: health rpc probe failed"},
		{"huge-body", "error: health rpc probe failed"},
	} {
		t.Run(tc.service, func(t *testing.T) {
			before := served.Load()
			r, out, err := doGRPC(context.Background(), addr, tc.service, hostTarget(&v1.Container{}).Dial, 5*time.Second)
			if served.Load() != before+1 {
				t.Fatalf("the server answered %d checks, want 1", served.Load()-before)
			}
			if r != Failure || err != nil || !strings.Contains(out, tc.want) {
				t.Errorf("%v %v %.200q, want failure with %q", r, err, out, tc.want)
			}
			if len(out) > maxOutput+256 {
				t.Errorf("output of %d bytes, want at most maxOutput (%d) and its prefix", len(out), maxOutput)
			}
			if tc.service != "long" && strings.Contains(out, strings.Repeat("m", 1<<10)) {
				t.Errorf("the message got through past maxHeaders: %d bytes of output", len(out))
			}
		})
	}
}

// TestHTTPClientHeaderBound: the client of httpGet hooks and of the
// redirects probes follow refuses headers past maxHeaders, where net/http
// would read 10 MB of them.
func TestHTTPClientHeaderBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Long", strings.Repeat("h", 1<<20))
	}))
	defer srv.Close()
	res, err := HTTPClient(HostDialer()).Get(srv.URL)
	if err == nil {
		res.Body.Close()
		t.Fatalf("a 1 MiB header was read: %v", res.Status)
	}
	if !strings.Contains(err.Error(), "exceeded") {
		t.Errorf("err = %v, want headers exceeded", err)
	}
}

// TestProbeOutputBounded: whatever a handler's output is made of (a body, a
// status message, or an error whose text quotes what the server sent, such
// as a malformed status line), Do returns at most maxOutput of it.
func TestProbeOutputBounded(t *testing.T) {
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
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				conn.Read(buf)
				conn.Write([]byte("HTTP/1.1 " + strings.Repeat("s", 512<<10) + "\r\n\r\n"))
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	probe := &v1.Probe{TimeoutSeconds: 5, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(port)}}}
	r, out, err := Do(context.Background(), probe, hostTarget(&v1.Container{}))
	if r != Failure || err != nil || !strings.Contains(out, "malformed HTTP") {
		t.Fatalf("%v %v %.200q, want a failure saying the answer is malformed", r, err, out)
	}
	if len(out) > maxOutput {
		t.Errorf("output of %d bytes, want at most %d", len(out), maxOutput)
	}
}

// TestProbeErrorBounded: a probe that could not be made is thrown away, and
// the error's text, which may quote the container (an exec that failed in
// it), is what Errored is told and what is logged, at most maxOutput of it.
func TestProbeErrorBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		huge := "exec failed: " + strings.Repeat("e", 1<<20)
		exec := func(context.Context, []string, io.Writer) (int, error) { return -1, errors.New(huge) }
		var logged bytes.Buffer
		u := &updates{t0: time.Now()}
		var errs []error
		cfg := Config{Target: &Target{Exec: exec}, Liveness: execProbe("live", 1, 1, 1), ContainerID: "c1",
			StartedAt: time.Now(), Report: u.report, Logger: slog.New(slog.NewTextHandler(&logged, nil)),
			Errored: func(_ Kind, _ Result, err error) { errs = append(errs, err) }}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		Run(ctx, cfg)
		if len(u.list) != 0 {
			t.Errorf("updates %v, want none: an errored probe is thrown away", u)
		}
		if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "exec failed: eee") {
			t.Fatalf("errored %d times, want once, quoting the error", len(errs))
		}
		if n := len(errs[0].Error()); n > maxOutput {
			t.Errorf("error of %d bytes, want at most %d", n, maxOutput)
		}
		if n := logged.Len(); n > 4*maxOutput {
			t.Errorf("logged %d bytes, want at most %d", n, 4*maxOutput)
		}
	})
}
