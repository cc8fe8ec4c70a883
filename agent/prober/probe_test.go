package prober

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func hostTarget(c *v1.Container) *Target {
	return &Target{Container: c, Host: "127.0.0.1", Dial: HostDialer()}
}

func splitPort(t *testing.T, u string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func TestHTTPProbe(t *testing.T) {
	var gotUA, gotAccept, gotHost, gotX string
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotAccept, gotHost = r.UserAgent(), r.Header.Get("Accept"), r.Host
		if x := r.Header.Get("X-Probe"); x != "" {
			gotX = x
		}
		fmt.Fprint(w, "fine")
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "sick", 500) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.Repeat("x", 1<<20))) })
	mux.HandleFunc("/local", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		// A hostile answer: headers without end, until the probe gives up.
		for i := 0; ; i++ {
			w.Header().Add(fmt.Sprintf("X-%d", i), strings.Repeat("h", 1000))
			if i == 100000 {
				break
			}
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { time.Sleep(1500 * time.Millisecond) })
	plain := httptest.NewServer(mux)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(mux) // self-signed: not verified, as the kubelet
	defer tlsSrv.Close()

	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "probe-port", ContainerPort: int32(splitPort(t, tlsSrv.URL))}}}
	port := intstr.FromInt32(int32(splitPort(t, plain.URL)))
	for _, tc := range []struct {
		name   string
		get    v1.HTTPGetAction
		want   Result
		output string
	}{
		{"ok", v1.HTTPGetAction{Path: "/ok", Port: port, HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "1"}}}, Success, "fine"},
		{"500", v1.HTTPGetAction{Path: "/fail", Port: port}, Failure, "HTTP probe failed with statuscode: 500"},
		{"https on a named port", v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("probe-port"), Scheme: v1.URISchemeHTTPS}, Success, "fine"},
		{"local redirect followed", v1.HTTPGetAction{Path: "/local", Port: port}, Success, "fine"},
		{"redirect to another host is a warning", v1.HTTPGetAction{Path: "/away", Port: port}, Success, "Probe terminated redirects"},
		{"redirect loop", v1.HTTPGetAction{Path: "/loop", Port: port}, Failure, "stopped after 10 redirects"},
		{"timeout", v1.HTTPGetAction{Path: "/slow", Port: port}, Failure, "deadline exceeded"},
		{"100 MB of headers", v1.HTTPGetAction{Path: "/headers", Port: port}, Failure, ""},
		{"refused", v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(1)}, Failure, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, out, err := Do(context.Background(), &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &tc.get}}, hostTarget(c))
			if err != nil || r != tc.want || !strings.Contains(out, tc.output) {
				t.Errorf("got %v %q %v, want %v with %q", r, out, err, tc.want, tc.output)
			}
		})
	}
	if gotUA != "kube-probe/1.37" || gotAccept != "*/*" || gotX != "1" || !strings.HasPrefix(gotHost, "127.0.0.1:") {
		t.Errorf("request had User-Agent %q, Accept %q, Host %q, X-Probe %q", gotUA, gotAccept, gotHost, gotX)
	}
	// The Host header sets the request's host.
	get := &v1.HTTPGetAction{Path: "/ok", Port: port, HTTPHeaders: []v1.HTTPHeader{{Name: "Host", Value: "api.example"}}}
	if r, _, _ := Do(context.Background(), &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: get}}, hostTarget(c)); r != Success || gotHost != "api.example" {
		t.Errorf("Host header: %v, server saw %q", r, gotHost)
	}
	// The body is read only so far.
	_, out, _ := Do(context.Background(), &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/big", Port: port}}}, hostTarget(c))
	if len(out) != maxOutput {
		t.Errorf("read %d bytes of a 1 MiB body, want %d", len(out), maxOutput)
	}
	// A named port the container does not have is an error, not a probe.
	if _, _, err := Do(context.Background(), &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("nope")}}}, hostTarget(c)); err == nil || !strings.Contains(err.Error(), `port "nope" not found`) {
		t.Errorf("unknown named port: %v", err)
	}
}

// An HTTP answer whose body is cut short (or still coming at the timeout)
// is an error, with a failure, as the kubelet's DoHTTPProbe returns it: its
// prober throws the probe away, whatever the status.
func TestHTTPProbeBodyError(t *testing.T) {
	for _, status := range []int{200, 500} {
		target := &Target{Container: &v1.Container{}, Host: "127.0.0.1",
			Dial: func(context.Context, string, string) (net.Conn, error) {
				client, server := net.Pipe()
				go func() {
					defer server.Close()
					if _, err := http.ReadRequest(bufio.NewReader(server)); err != nil {
						return
					}
					fmt.Fprintf(server, "HTTP/1.1 %d X\r\nContent-Length: 100\r\n\r\nshort", status)
				}()
				return client, nil
			}}
		probe := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
		if r, out, err := Do(context.Background(), probe, target); r != Failure || out != "" || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("status %d, body cut short: %v %q %v, want a failure with the error", status, r, out, err)
		}
	}
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "p", ContainerPort: int32(port)}}}
	probe := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("p")}}}
	if r, out, err := Do(context.Background(), probe, hostTarget(c)); r != Success || err != nil {
		t.Errorf("open port: %v %q %v", r, out, err)
	}
	l.Close()
	if r, out, _ := Do(context.Background(), probe, hostTarget(c)); r != Failure || !strings.Contains(out, "refused") {
		t.Errorf("closed port: %v %q", r, out)
	}
}

func TestExecProbe(t *testing.T) {
	target := hostTarget(&v1.Container{})
	probe := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}}
	for _, tc := range []struct {
		name string
		exec Execer
		want Result
		out  string
	}{
		{"exit 0", func(ctx context.Context, cmd []string, out io.Writer) (int, error) {
			fmt.Fprint(out, "ok "+cmd[0])
			return 0, nil
		}, Success, "ok check"},
		{"exit 1", func(ctx context.Context, cmd []string, out io.Writer) (int, error) {
			fmt.Fprint(out, strings.Repeat("e", 20<<10))
			return 1, nil
		}, Failure, strings.Repeat("e", maxOutput)},
		{"timeout", func(ctx context.Context, cmd []string, out io.Writer) (int, error) {
			<-ctx.Done()
			return -1, ctx.Err()
		}, Failure, "command timed out after 1s"},
	} {
		target.Exec = tc.exec
		if r, out, err := Do(context.Background(), probe, target); r != tc.want || out != tc.out || err != nil {
			t.Errorf("%s: %v %.40q %v, want %v %.40q", tc.name, r, out, err, tc.want, tc.out)
		}
	}
	// An exec the runtime could not run, a command the container does not
	// have or cannot execute among them, is an error: containerd's ExecSync
	// fails for it, with no exit status, and the kubelet's prober throws
	// the probe away.
	for _, e := range []error{
		errors.New("no such container"),
		fmt.Errorf("%w: exec: \"check\": executable file not found in $PATH", podspec.ErrCommandNotFound),
		fmt.Errorf("%w: permission denied", podspec.ErrCommandNotExecutable),
	} {
		target.Exec = func(context.Context, []string, io.Writer) (int, error) { return -1, e }
		if r, out, err := Do(context.Background(), probe, target); r != Unknown || out != "" || !errors.Is(err, e) {
			t.Errorf("exec error %q: %v %q %v, want an error", e, r, out, err)
		}
	}
}

// healthServer answers grpc.health.v1.Health/Check over unencrypted HTTP/2
// the way grpc-go's health server does: a framed response and the status
// in trailers, or a trailers-only answer for an unknown method.
func healthServer(t *testing.T, statuses map[string]uint64) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/grpc.health.v1.Health/Check", func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 || r.Header.Get("Content-Type") != "application/grpc" || r.Header.Get("Te") != "trailers" {
			http.Error(w, "not grpc", 400)
			return
		}
		body, _ := io.ReadAll(r.Body)
		service := ""
		if len(body) > 7 { // frame header, tag, length
			service = string(body[7:])
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		st, ok := statuses[service]
		if !ok {
			w.Header().Set("Grpc-Status", "5")
			w.Header().Set("Grpc-Message", "unknown%20service")
			return
		}
		msg := binary.AppendUvarint([]byte{0x08}, st)
		w.Write(grpcFrame(msg))
		w.Header().Set("Grpc-Status", "0")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "12")
		w.Header().Set("Grpc-Message", "unknown%20service%20grpc.health.v1.Health")
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestGRPCProbe(t *testing.T) {
	u := healthServer(t, map[string]uint64{"": 1, "db": 2})
	port := int32(splitPort(t, u))
	svc := func(s string) *string { return &s }
	for _, tc := range []struct {
		service *string
		want    Result
		out     string
	}{
		{nil, Success, "service healthy"},
		{svc("db"), Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{svc("nope"), Failure, "rpc error: code = 5 desc = unknown service"},
	} {
		probe := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: port, Service: tc.service}}}
		if r, out, err := Do(context.Background(), probe, hostTarget(&v1.Container{})); r != tc.want || !strings.Contains(out, tc.out) || err != nil {
			t.Errorf("service %v: %v %q %v, want %v %q", tc.service, r, out, err, tc.want, tc.out)
		}
	}
	// A plain HTTP/1 server is no gRPC server.
	h1 := httptest.NewServer(http.NotFoundHandler())
	defer h1.Close()
	probe := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(splitPort(t, h1.URL))}}}
	if r, _, _ := Do(context.Background(), probe, hostTarget(&v1.Container{})); r != Failure {
		t.Errorf("HTTP/1 server: %v", r)
	}
}

func TestHealthMessages(t *testing.T) {
	if got := healthRequest("db"); string(got) != "\x0a\x02db" {
		t.Errorf("request %q", got)
	}
	for _, tc := range []struct {
		body []byte
		want uint64
		err  bool
	}{
		{grpcFrame([]byte{0x08, 0x01}), 1, false},
		{grpcFrame(nil), 0, false}, // status absent: UNKNOWN
		{grpcFrame([]byte{0x12, 0x01, 'x', 0x08, 0x02}), 2, false},
		{grpcFrame([]byte{0x08}), 0, true},
		{[]byte{0, 0, 0, 0, 9, 0x08}, 0, true},
		{[]byte{1, 0, 0, 0, 0}, 0, true},
	} {
		got, err := healthResponse(tc.body)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%x: %d %v", tc.body, got, err)
		}
	}
}
