package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The report: idle keep-alive connections to the read-only port stayed open as
// long as their clients liked, and under a low open-file limit nine of them
// made the CLI socket stop answering. Now the read-only port serves at most an
// eighth of the limit at once; the others wait unanswered, and the CLI socket
// and the pods carry on.
func TestReadOnlyPortFloodLeavesCLIAndPods(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Nofile = 64
	const maxConns = 64 / 8
	d.Start()
	d.WriteManifest("before.yaml", sleeper("before", ""))
	d.WaitRunning("before", 30*time.Second)
	// The harness's own keep-alive connections would hold some of the slots.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	pid := d.PID()
	fdsBefore := openFDs(t, pid)

	// 100 clients each ask for /healthz and then keep their connection open.
	addr := fmt.Sprintf("127.0.0.1:%d", d.Port)
	var mu sync.Mutex
	var answered []net.Conn
	for range 100 {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
			t.Fatal(err)
		}
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return
			}
			resp.Body.Close()
			mu.Lock()
			answered = append(answered, c)
			mu.Unlock()
		}()
	}
	nAnswered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(answered)
	}
	d.Eventually(30*time.Second, "the read-only port answers up to its cap", func() error {
		if n := nAnswered(); n < maxConns {
			return fmt.Errorf("%d answered", n)
		}
		return nil
	})
	if fds := openFDs(t, pid); fds > fdsBefore+maxConns+4 {
		t.Errorf("the daemon holds %d open files with 100 clients on the read-only port, %d before", fds, fdsBefore)
	}

	// The read-only port is full: the CLI socket answers, and a new pod starts.
	d.SocketOnly = true
	if out := d.CLI("ps"); !strings.Contains(out, "before-"+d.Name) {
		t.Errorf("ps while the read-only port is full:\n%s", out)
	}
	d.WriteManifest("during.yaml", sleeper("during", ""))
	d.WaitRunning("during", 30*time.Second)

	// All this while, the clients beyond the cap got no answer; once a
	// served one leaves, one of them does.
	if n := nAnswered(); n != maxConns {
		t.Errorf("%d clients answered with a cap of %d", n, maxConns)
	}
	mu.Lock()
	answered[0].Close()
	mu.Unlock()
	d.Eventually(30*time.Second, "a waiting client answered once a slot is free", func() error {
		if n := nAnswered(); n != maxConns+1 {
			return fmt.Errorf("%d answered", n)
		}
		return nil
	})
	d.SocketOnly = false
}

// openFDs counts the open file descriptors of process pid.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// The read-only port is auxiliary: when its address is taken the daemon runs
// on and its pods with it, /healthz?verbose on the CLI socket says why the
// port is not served, and the listener is retried until the address is free.
func TestReadOnlyPortInUseIsRetried(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	taken, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", d.Port))
	if err != nil {
		t.Fatal(err)
	}
	d.SocketOnly = true
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	d.WaitRunning("web", 30*time.Second)

	verbose := func() string {
		resp, err := d.SocketClient().Get("http://staticpodd/healthz?verbose")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz?verbose: %d\n%s", resp.StatusCode, b)
		}
		return string(b)
	}
	d.Eventually(10*time.Second, "healthz names the read-only port's failure", func() error {
		if v := verbose(); !strings.Contains(v, "[-]read-only-port failed") || !strings.Contains(v, "address already in use") {
			return fmt.Errorf("healthz:\n%s", v)
		}
		return nil
	})
	if !d.Running() {
		t.Fatal("the daemon exited while its read-only port was taken")
	}

	taken.Close()
	d.Eventually(60*time.Second, "the read-only port served once free", func() error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", d.Port))
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	if v := verbose(); !strings.Contains(v, "[+]read-only-port ok") {
		t.Errorf("healthz once served:\n%s", v)
	}
	if p := d.Pod("web"); p == nil || p.Status.Phase != v1.PodRunning {
		t.Errorf("web after the port came back: %+v", p)
	}
}

// The kubelet's healthz port, which kubeadm's wait-control-plane polls: "ok"
// once the daemon runs. Taken, it is retried as the read-only port is,
// and the daemon and its pods run on meanwhile.
func TestHealthzPortServedAndRetried(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	addr := fmt.Sprintf("127.0.0.1:%d", d.HealthzPort)
	taken, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	d.WaitRunning("web", 30*time.Second)
	get := func(url string) (string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b), err
	}
	readOnly := fmt.Sprintf("http://127.0.0.1:%d/healthz?verbose", d.Port)
	d.Eventually(10*time.Second, "healthz names the healthz port's failure", func() error {
		if v, err := get(readOnly); err != nil || !strings.Contains(v, "[-]healthz-port failed") || !strings.Contains(v, "address already in use") {
			return fmt.Errorf("%v:\n%s", err, v)
		}
		return nil
	})
	taken.Close()
	d.Eventually(60*time.Second, "the healthz port served once free", func() error {
		if v, err := get("http://" + addr + "/healthz"); err != nil || v != "200 ok" {
			return fmt.Errorf("%q, %v", v, err)
		}
		return nil
	})
	if v, err := get("http://" + addr + "/healthz?verbose"); err != nil || v != "200 [+]ping ok\nhealthz check passed\n" {
		t.Errorf("healthz port ?verbose: %q, %v", v, err)
	}
	if v, _ := get(readOnly); !strings.Contains(v, "[+]healthz-port ok") {
		t.Errorf("read-only port's healthz once served:\n%s", v)
	}
}
