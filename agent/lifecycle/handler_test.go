package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpodd/staticpodd/agent/prober"
)

const pod = "web-node1_default(uid1)"

var quiet = slog.New(slog.DiscardHandler)

func TestExecHook(t *testing.T) {
	exec := func(ctx context.Context, cmd []string, stdout, stderr io.Writer) (int, error) {
		switch cmd[0] {
		case "fail":
			fmt.Fprint(stdout, "some output")
			fmt.Fprint(stderr, "it broke")
			return 3, nil
		case "nope":
			return -1, errors.New(`exec "nope": command not found`)
		case "chatty":
			fmt.Fprint(stdout, strings.Repeat("x", 1<<20))
			fmt.Fprint(stderr, strings.Repeat("y", 1<<20))
			return 1, nil
		}
		return 0, nil
	}
	tgt := Target{Container: &v1.Container{Name: "app"}, Exec: exec}
	for _, tc := range []struct {
		cmd  []string
		msg  string // "" = success
		errs string
	}{
		{[]string{"ok", "a"}, "", ""},
		{[]string{"fail", "x"}, `Exec lifecycle hook ([fail x]) for Container "app" in Pod "web-node1_default(uid1)" failed - error: command 'fail x' exited with 3: it broke, message: "some outputit broke"`, "exited with 3"},
		{[]string{"nope"}, `Exec lifecycle hook ([nope]) for Container "app"`, "command not found"},
	} {
		msg, err := Run(t.Context(), &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: tc.cmd}}, tgt, pod, quiet)
		if tc.msg == "" {
			if err != nil || msg != "" {
				t.Errorf("%v: %q %v, want success", tc.cmd, msg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errs) || !strings.HasPrefix(msg, tc.msg) {
			t.Errorf("%v: got %q, %v\nwant message %q, error with %q", tc.cmd, msg, err, tc.msg, tc.errs)
		}
	}
	msg, _ := Run(t.Context(), &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"chatty"}}}, tgt, pod, quiet)
	if len(msg) > maxOutput {
		t.Errorf("a hook that prints 1 MiB gives a message of %d bytes", len(msg))
	}
	if _, err := Run(t.Context(), &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"ok"}}}, Target{Container: &v1.Container{Name: "app"}}, pod, quiet); err == nil {
		t.Error("an exec hook without a way to exec succeeded")
	}
}

func port(t *testing.T, u string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func TestHTTPHook(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s ua=%s auth=%s", r.URL.Path, r.Host, r.UserAgent(), r.Header.Get("Authorization")))
		mu.Unlock()
		if r.URL.Path == "/fail" {
			http.Error(w, "no", http.StatusInternalServerError)
		}
	})
	plain := httptest.NewServer(mux)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(mux)
	defer tlsSrv.Close()
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(port(t, plain.URL))}}}
	tgt := Target{Container: c, Host: "127.0.0.1", Dial: prober.HostDialer()}
	auth := []v1.HTTPHeader{{Name: "Authorization", Value: "Bearer x"}}
	for _, tc := range []struct {
		name string
		get  v1.HTTPGetAction
		ok   bool
		seen string
	}{
		{"named port, host default", v1.HTTPGetAction{Path: "/stop", Port: intstr.FromString("web")}, true,
			"/stop 127.0.0.1:" + strconv.Itoa(port(t, plain.URL)) + " ua=kube-lifecycle/1.37 auth="},
		{"status codes are not checked", v1.HTTPGetAction{Path: "/fail", Port: intstr.FromString("web")}, true, "/fail "},
		{"https, not verified", v1.HTTPGetAction{Path: "/tls", Port: intstr.FromInt(port(t, tlsSrv.URL)), Scheme: v1.URISchemeHTTPS}, true, "/tls "},
		{"https answered in http is retried in http without Authorization", v1.HTTPGetAction{Path: "/fallback", Port: intstr.FromString("web"),
			Scheme: v1.URISchemeHTTPS, HTTPHeaders: auth}, true, "/fallback 127.0.0.1:" + strconv.Itoa(port(t, plain.URL)) + " ua=kube-lifecycle/1.37 auth="},
		{"refused", v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(1)}, false, ""},
		{"unknown named port", v1.HTTPGetAction{Path: "/", Port: intstr.FromString("nope")}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			msg, err := Run(t.Context(), &v1.LifecycleHandler{HTTPGet: &tc.get}, tgt, pod, quiet)
			if tc.ok != (err == nil) {
				t.Fatalf("got %q, %v; want ok=%v", msg, err, tc.ok)
			}
			if !tc.ok && !strings.HasPrefix(msg, fmt.Sprintf(`HTTP lifecycle hook (%s) for Container "app" in Pod %q failed - error: `, tc.get.Path, pod)) {
				t.Errorf("message %q", msg)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.seen != "" && (len(seen) != 1 || !strings.HasPrefix(seen[0], tc.seen)) {
				t.Errorf("server saw %q, want one request like %q", seen, tc.seen)
			}
		})
	}
}

func TestSleepHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 5}}
		tgt := Target{Container: &v1.Container{Name: "app"}}
		start := time.Now()
		if msg, err := Run(t.Context(), h, tgt, pod, quiet); err != nil || time.Since(start) != 5*time.Second {
			t.Errorf("sleep 5: %q %v after %v", msg, err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start = time.Now()
		msg, err := Run(ctx, h, tgt, pod, quiet)
		if !errors.Is(err, ErrSleepCut) || time.Since(start) != 2*time.Second ||
			msg != `Sleep lifecycle hook (5) for Container "app" in Pod "web-node1_default(uid1)" failed - error: container terminated before sleep hook finished` {
			t.Errorf("sleep cut after 2s: %q %v after %v", msg, err, time.Since(start))
		}
	})
}

func TestTCPSocketHookFails(t *testing.T) {
	msg, err := Run(t.Context(), &v1.LifecycleHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(80)}},
		Target{Container: &v1.Container{Name: "app"}}, pod, quiet)
	if err == nil || !strings.HasPrefix(msg, "Cannot run handler: invalid handler") {
		t.Errorf("tcpSocket hook: %q %v", msg, err)
	}
}
