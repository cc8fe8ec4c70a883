// Package lifecycle runs a container's postStart and preStop hooks the way the
// kubelet's handler runner does (pkg/kubelet/lifecycle/handlers.go): exec in
// the container, httpGet to it, or sleep (Run). PostStarts are a pod worker's
// postStart hooks that run, each in a goroutine it joins, with the marks that
// run a hook again after a daemon restart cut it short; PreStop is a preStop
// hook run in a container's kill, within its grace period. How a hook
// reaches its container is the caller's, through the same prober.Target
// probes use.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
)

// maxOutput bounds what is kept of an exec hook's stdout and of its stderr,
// and what is read of an httpGet hook's response body (the kubelet's
// maxRespBodyLength).
const maxOutput = podspec.MaxOutput

// Target is how hooks reach one container: the probes' host and dialer, and
// an exec that keeps stdout and stderr apart.
type Target struct {
	Container *v1.Container
	// Host is where an httpGet hook connects when it names no host: the pod
	// IP, or 127.0.0.1 inside a pod's own network namespace that has none.
	Host string
	Dial prober.Dialer
	// Exec runs cmd in the container and returns its exit code; it kills cmd
	// when ctx ends. nil: exec hooks fail with a reason.
	Exec func(ctx context.Context, cmd []string, stdout, stderr io.Writer) (exitCode int, err error)
}

// ErrSleepCut is the failure of a sleep hook whose context ended first: the
// container stopped, or the hook's time was up.
var ErrSleepCut = errors.New("container terminated before sleep hook finished")

// Run runs hook h of container t.Container, of the pod named pod as the
// kubelet's format.Pod names it (name_namespace(uid)), and returns, when it
// failed, its error and the kubelet's message for it. It returns when the hook
// is done or ctx ends: a hook has no timeout of its own, as in the kubelet; the
// caller bounds it. An httpGet hook's status code is not checked: only a
// request that could not be made or answered fails.
func Run(ctx context.Context, h *v1.LifecycleHandler, t Target, pod string, logger *slog.Logger) (msg string, err error) {
	msg, err = run(ctx, h, t, pod, logger)
	// An exec hook's message holds its stdout and stderr, and its stderr
	// again in the error: maxOutput of it all, as of a probe's output.
	return podspec.Truncate(msg, maxOutput), err
}

func run(ctx context.Context, h *v1.LifecycleHandler, t Target, pod string, logger *slog.Logger) (msg string, err error) {
	name := t.Container.Name
	switch {
	case h.Exec != nil:
		out, err := runExec(ctx, h.Exec.Command, t)
		if err != nil {
			msg = fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, name, pod, err, out)
		}
		return msg, err
	case h.HTTPGet != nil:
		err := runHTTP(ctx, h.HTTPGet, t, logger)
		if err != nil {
			msg = fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, name, pod, err)
		}
		return msg, err
	case h.Sleep != nil:
		err := runSleep(ctx, time.Duration(h.Sleep.Seconds)*time.Second)
		if err != nil {
			msg = fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v", h.Sleep.Seconds, name, pod, err)
		}
		return msg, err
	case h.TCPSocket != nil:
		// Deprecated in the API, accepted by validation, never run.
		err := errors.New("invalid handler: tcpSocket is not supported as a lifecycle hook")
		return fmt.Sprintf("Cannot run handler: %v", err), err
	}
	err = errors.New("invalid handler: none set")
	return fmt.Sprintf("Cannot run handler: %v", err), err
}

// runExec runs cmd in the container; a non-zero exit is an error as CRI's
// ExecSync makes it (command '...' exited with N: <stderr>). out is stdout then
// stderr, as the kubelet's RunInContainer returns them.
func runExec(ctx context.Context, cmd []string, t Target) (out string, err error) {
	if t.Exec == nil {
		return "", errors.New("exec hooks are not available for this container")
	}
	stdout, stderr := &podspec.LimitWriter{N: maxOutput}, &podspec.LimitWriter{N: maxOutput}
	code, err := t.Exec(ctx, cmd, stdout, stderr)
	out = stdout.String() + stderr.String()
	switch {
	case err != nil:
		return out, err
	case code != 0:
		return out, fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, stderr.String())
	}
	return out, nil
}

// runHTTP is the kubelet's runHTTPHandler: an HTTPS request answered in plain
// HTTP is made again over HTTP, without its Authorization header.
func runHTTP(ctx context.Context, g *v1.HTTPGetAction, t Target, logger *slog.Logger) error {
	req, err := prober.HTTPRequest(ctx, g, t.Container, t.Host, "lifecycle")
	if err != nil {
		return err
	}
	client := prober.HTTPClient(t.Dial)
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	discard(resp)
	if errors.Is(err, http.ErrSchemeMismatch) {
		req = req.Clone(ctx)
		req.URL.Scheme = "http"
		req.Header.Del("Authorization")
		resp, httpErr := client.Do(req)
		discard(resp)
		if httpErr == nil {
			// The kubelet's LifecycleHTTPFallback warning.
			logger.Warn("HTTPS lifecycle hook answered over HTTP, retried with HTTP", "host", req.URL.Host)
			err = nil
		}
	}
	return err
}

// discard reads a little of a response's body, as the kubelet's
// discardHTTPRespBody, and closes it.
func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxOutput))
}

func runSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ErrSleepCut
	case <-t.C:
		return nil
	}
}
