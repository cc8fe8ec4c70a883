// Package prober runs a container's startup, liveness and readiness probes the
// way the kubelet does (pkg/kubelet/prober, pkg/probe): the four handlers, the
// thresholds, the initial delay and the period (Do, Run). A pod worker's
// Manager owns the goroutines of its containers' probes and writes what they
// say into a Results cache the worker reads (the kubelet's prober.Manager and
// results.Manager), with the marks that keep it across daemon restarts. How a
// probe reaches its container (a dialer into the pod's network namespace, an
// exec in the container) is the caller's: the runtime's.
package prober

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Result of one probe, or of a probe's run of results past its threshold.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	}
	return "unknown"
}

// maxOutput bounds what a probe reads of a response body or an exec's output,
// as the kubelet's maxRespBodyLength and exec maxReadLength.
const maxOutput = podspec.MaxOutput

// maxHeaders bounds the response headers (trailers too) of an httpGet or
// gRPC probe or an httpGet hook: net/http's default is 10 MB.
const maxHeaders = 16 << 10

// maxAnswer bounds what an httpGet probe reads of an answer, headers and
// body together; the body's first maxOutput bytes are kept.
const maxAnswer = 1 << 20

// kubeMinor is the Kubernetes version this daemon follows, for User-Agent
// headers as the kubelet sends them (kube-probe/1.37).
const kubeMinor = "1.37"

// Dialer connects to addr from where the container's network is: inside the
// pod's network namespace, or the host's for hostNetwork.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Execer runs cmd in the container, writing its combined output to out, and
// returns its exit code; it kills cmd when ctx ends.
type Execer func(ctx context.Context, cmd []string, out io.Writer) (exitCode int, err error)

// Target is how probes reach one container.
type Target struct {
	Container *v1.Container
	// Host is where an httpGet, tcpSocket or grpc probe connects when the
	// probe names no host: the pod IP, or 127.0.0.1 inside a pod's own
	// network namespace that has none.
	Host string
	Dial Dialer
	Exec Execer // nil: exec probes fail with a reason

	// client, made on first use, serves every httpGet probe of the target:
	// it keeps no connection between probes (as the kubelet's), but is not
	// made again for each.
	clientOnce sync.Once
	client     *http.Client
}

func (t *Target) httpClient() *http.Client {
	t.clientOnce.Do(func() { t.client = HTTPClient(t.Dial) })
	return t.client
}

// HTTPClient is the client of httpGet probes and hooks, as the kubelet's:
// TLS is not verified, no proxy, no keep-alive, redirects followed only to
// the same host and ten at most; it connects through dial. Bound its
// requests with their context.
func HTTPClient(dial Dialer) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, // as the kubelet
			DisableKeepAlives:  true,
			DisableCompression: true,
			Proxy:              nil,
			DialContext:        dial,

			MaxResponseHeaderBytes: maxHeaders,
		},
		CheckRedirect: redirectChecker,
	}
}

// HTTPRequest is the request of an httpGet probe or lifecycle hook of
// container c (the kubelet's NewRequestForHTTPGetAction): the host defaults to
// host, a port may be one of c's named ports, the path may carry a query, the
// headers are g's with User-Agent kube-<purpose>/<minor> ("probe",
// "lifecycle") and Accept */* unless g sets them (an empty Accept drops it),
// and a Host header sets the request's host. An error is a request that
// cannot be made (an unknown named port).
func HTTPRequest(ctx context.Context, g *v1.HTTPGetAction, c *v1.Container, host, purpose string) (*http.Request, error) {
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return nil, err
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	// httpprobe.formatURL: the path may carry a query.
	u, err := url.Parse(g.Path)
	if err != nil {
		u = &url.URL{Path: g.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(orDefault(g.Host, host), strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", "kube-"+purpose+"/"+kubeMinor)
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	} else if req.Header.Get("Accept") == "" {
		req.Header.Del("Accept")
	}
	req.Host = req.Header.Get("Host")
	return req, nil
}

// Do runs probe p once against t, bounded by p's timeoutSeconds, and says
// what happened in output (the kubelet's prober.runProbe). err is a probe that
// could not be made at all (a named port the container does not have, an
// exec the runtime could not run, an HTTP answer whose body could not be
// read), whose result Run throws away as the kubelet's prober does; r is
// then the state the kubelet's event names (unknown, or failure for the
// body).
func Do(ctx context.Context, p *v1.Probe, t *Target) (r Result, output string, err error) {
	r, output, err = do(ctx, p, t)
	// Each handler reads a bounded part of what the container says, but an
	// error's text may quote more of it (a malformed status line, a GOAWAY's
	// debug data): the output of every handler is cut here.
	return r, podspec.Truncate(output, maxOutput), err
}

func do(ctx context.Context, p *v1.Probe, t *Target) (r Result, output string, err error) {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.Exec != nil:
		return doExec(ctx, p.Exec, t, timeout)
	case p.HTTPGet != nil:
		return doHTTP(ctx, p.HTTPGet, t)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, t.Container)
		if err != nil {
			return Unknown, "", err
		}
		return doTCP(ctx, net.JoinHostPort(orDefault(p.TCPSocket.Host, t.Host), strconv.Itoa(port)), t.Dial)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return doGRPC(ctx, net.JoinHostPort(t.Host, strconv.Itoa(int(p.GRPC.Port))), service, t.Dial, timeout)
	}
	return Unknown, "", errors.New("probe has no handler")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// resolvePort is the kubelet's probe.ResolveContainerPort: a number, or the
// name of one of the container's ports.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	port := -1
	switch p.Type {
	case intstr.Int:
		port = p.IntValue()
	case intstr.String:
		found := false
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port, found = int(cp.ContainerPort), true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("port %q not found", p.StrVal)
		}
	}
	if port > 0 && port < 65536 {
		return port, nil
	}
	return port, fmt.Errorf("invalid port number: %v", port)
}

func doExec(ctx context.Context, e *v1.ExecAction, t *Target, timeout time.Duration) (Result, string, error) {
	if t.Exec == nil {
		return Failure, "exec probes are not available for this container", nil
	}
	out := &podspec.LimitWriter{N: maxOutput}
	code, err := t.Exec(ctx, e.Command, out)
	switch {
	case ctx.Err() != nil:
		// The kubelet's remote.ErrCommandTimedOut.
		return Failure, fmt.Sprintf("command timed out after %v", timeout), nil
	case err != nil:
		// A command the container does not have, or cannot execute, is
		// such an error too: containerd's ExecSync fails ("failed to start
		// exec"), with no exit status, and the kubelet's exec prober makes
		// it an error whose result is thrown away (kubernetes#106682).
		return Unknown, "", err
	case code != 0:
		return Failure, out.String(), nil
	}
	return Success, out.String(), nil
}

// dialer sets what the kubelet's probe.ProbeDialer sets: SO_LINGER of one
// second, so that probes leave no sockets in TIME-WAIT for a minute.
func lingerControl(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) {
		_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
	})
}

// HostDialer dials from the daemon's own network namespace, as the kubelet's
// probes do.
func HostDialer() Dialer {
	d := &net.Dialer{Control: lingerControl}
	return d.DialContext
}

func doTCP(ctx context.Context, addr string, dial Dialer) (Result, string, error) {
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return Failure, err.Error(), nil
	}
	_ = conn.Close()
	return Success, "", nil
}

func doHTTP(ctx context.Context, g *v1.HTTPGetAction, t *Target) (Result, string, error) {
	req, err := HTTPRequest(ctx, g, t.Container, t.Host, "probe")
	if err != nil {
		return Unknown, "", err
	}
	res, err := t.get(ctx, req)
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxOutput))
	if err != nil {
		// A body cut short, or still coming at the timeout: the kubelet's
		// DoHTTPProbe returns the read's error with a failure, which its
		// prober throws away ("errored and resulted in failure state").
		return Failure, "", err
	}
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			// A redirect to another host is not followed: a warning, which
			// counts as success.
			return Success, fmt.Sprintf("Probe terminated redirects, Response body: %v", string(b)), nil
		}
		return Success, string(b), nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// get makes one probe request. The request itself is written and its
// answer read on the probe's own goroutine over one connection (http.Client
// adds a goroutine to dial and two per connection, which cost more than the
// probe itself); only a redirect to follow goes through the client, which
// follows it the kubelet's way.
func (t *Target) get(ctx context.Context, req *http.Request) (*http.Response, error) {
	res, err := t.getOnce(ctx, req)
	var ue *url.Error
	if errors.As(err, &ue) {
		return nil, err // from the client that followed a redirect: worded already
	}
	if err != nil {
		// As http.Client words it, which the kubelet's messages show.
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (Client.Timeout exceeded while awaiting headers)", context.DeadlineExceeded)
		}
		return nil, &url.Error{Op: "Get", URL: req.URL.String(), Err: err}
	}
	return res, nil
}

func (t *Target) getOnce(ctx context.Context, req *http.Request) (*http.Response, error) {
	conn, err := t.Dial(ctx, "tcp", req.URL.Host)
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	if req.URL.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: req.URL.Hostname()}) // as the kubelet
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	req.Close = true // the kubelet's transport keeps no connection either
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	// A container's answer is read only so far, headers included (an
	// http.Client stops headers at 10 MB; a probe needs far less).
	res, err := http.ReadResponse(bufio.NewReader(io.LimitReader(conn, maxAnswer)), req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	res.Body = closeBoth{res.Body, conn}
	if loc := res.Header.Get("Location"); loc != "" && res.StatusCode >= 300 && res.StatusCode < 400 {
		res.Body.Close()
		req.Close = false
		return t.httpClient().Do(req)
	}
	return res, nil
}

// closeBoth closes a response's body and its connection.
type closeBoth struct {
	io.ReadCloser
	conn net.Conn
}

func (c closeBoth) Close() error {
	err := c.ReadCloser.Close()
	return errors.Join(err, c.conn.Close())
}

// redirectChecker is the kubelet's with followNonLocalRedirects false: a
// redirect is followed only to the same host, ten at most.
func redirectChecker(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}
