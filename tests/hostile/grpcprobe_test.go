package hostile

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// hostileHealth is a gRPC health server over unencrypted HTTP/2 that answers
// three of every four checks of each service with status 2 (UNKNOWN) and a
// grpc-message of msgSize bytes, different each time so that nothing can
// count it as a repeat; the fourth is SERVING. It counts the checks and the
// turns from SERVING to failing (each one an Unhealthy event).
type hostileHealth struct {
	filler string

	mu       sync.Mutex // guards the fields below
	checks   int
	failures int // turns from SERVING to failing
	byName   map[string]int
}

func (h *hostileHealth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<10))
	service := ""
	if len(body) > 7 { // frame header, tag, length
		service = string(body[7:])
	}
	h.mu.Lock()
	n := h.byName[service]
	h.byName[service]++
	h.checks++
	if n%4 == 1 {
		h.failures++
	}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/grpc")
	if n%4 == 0 {
		w.Header().Set("Trailer", "Grpc-Status")
		frame := []byte{0, 0, 0, 0, 2, 0x08, 0x01} // HealthCheckResponse{status: SERVING}
		w.Write(frame)
		w.Header().Set("Grpc-Status", "0")
		return
	}
	// A trailers-only answer: the status and message in the headers.
	w.Header().Set("Grpc-Status", "2")
	w.Header().Set("Grpc-Message", fmt.Sprintf("%s-%d-%d-", service, n, time.Now().UnixNano())+h.filler)
}

func (h *hostileHealth) counts() (checks, failures int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.checks, h.failures
}

// TestHostileGRPCProbeMessage runs a pod whose gRPC probes reach a server
// that answers most checks with a different 8 MB grpc-message. The daemon
// must not hold, log or record the message: its RSS stays near where it
// started and its log grows by a few KiB per Unhealthy event, not by the
// message.
func TestHostileGRPCProbeMessage(t *testing.T) {
	t.Parallel()
	d := testdaemon.New(t)
	const msgSize = 8 << 20
	srv := &hostileHealth{filler: strings.Repeat("x", msgSize), byName: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, Protocols: new(http.Protocols)}
	hs.Protocols.SetUnencryptedHTTP2(true)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	// Two containers, each probing its own service of the server once a
	// second, as two pods would.
	var containers strings.Builder
	for _, name := range []string{"a", "b"} {
		fmt.Fprintf(&containers, `  - name: %s
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    readinessProbe:
      grpc: {port: %d, service: %s}
      periodSeconds: 1
      timeoutSeconds: 5
      failureThreshold: 1
`, name, port, name)
	}
	d.WriteManifest("grpc.yaml", `apiVersion: v1
kind: Pod
metadata: {name: grpcprobe}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
`+containers.String())
	d.Start()
	d.WaitRunning("grpcprobe", 30*time.Second)
	d.Eventually(30*time.Second, "the first checks", func() error {
		if checks, _ := srv.counts(); checks < 2 {
			return fmt.Errorf("%d checks", checks)
		}
		return nil
	})

	pid := d.PID()
	startRSS := rssKiB(t, pid, "VmRSS")
	resetPeakRSS(t, pid)
	startLog := len(d.Output())
	_, startFailures := srv.counts()

	const checks = 30
	d.Eventually(2*time.Minute, fmt.Sprintf("%d checks", checks), func() error {
		if n, _ := srv.counts(); n < checks {
			return fmt.Errorf("%d checks", n)
		}
		return nil
	})
	peakRSS := rssKiB(t, pid, "VmHWM")
	afterRSS := rssKiB(t, pid, "VmRSS")
	n, failures := srv.counts()
	events := failures - startFailures
	logBytes := len(d.Output()) - startLog
	t.Logf("%d checks, %d failure events: daemon RSS %d MiB at start, %d MiB peak, %d MiB after; log %d bytes, %d bytes per event",
		n, events, startRSS>>10, peakRSS>>10, afterRSS>>10, logBytes, logBytes/max(events, 1))

	if events < 5 {
		t.Fatalf("only %d failure events", events)
	}
	// Before messages were bounded, the daemon grew by hundreds of MiB.
	if grew := peakRSS - startRSS; grew > 32<<10 {
		t.Errorf("the daemon's peak RSS grew by %d MiB, want under 32 MiB", grew>>10)
	}
	if per := logBytes / events; per > 4<<10 {
		t.Errorf("the daemon's log grew by %d bytes per failure event, want under 4 KiB", per)
	}

	d.RemoveManifest("grpc.yaml")
	d.Eventually(60*time.Second, "the pod is gone", func() error {
		if d.Pod("grpcprobe") != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	t.Logf("daemon RSS after the pod is gone: %d MiB", rssKiB(t, pid, "VmRSS")>>10)
}
