//go:build nodee2e

package nodee2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// unitSockEnv names the socket on which the test serves systemctl for the
// daemon under test.
const unitSockEnv = "STATICPODD_NODE_E2E_UNIT"

// unit is the name the suite finds with "systemctl list-units *kubelet*"
// (it matches kubelet-\w+).
const unit = "kubelet-staticpodd.service"

// maxRequest bounds one systemctl request (its arguments).
const maxRequest = 64 << 10

// serveUnit serves systemctl requests for d on a unix socket until the test
// ends and returns the socket's path. The socket is in a directory only root
// can enter.
func serveUnit(t *testing.T, d *testdaemon.Daemon) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "unit.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	var mu sync.Mutex // one request at a time, as systemd runs one job per unit
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b, err := io.ReadAll(io.LimitReader(c, maxRequest))
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			code, out := systemctl(d, strings.Split(string(b), "\x00"))
			mu.Unlock()
			fmt.Fprintf(c, "%d\n%s", code, out)
			c.Close()
		}
	}()
	return sock
}

// systemctl does what systemctl would for the unit running d: list it,
// reset-failed (nothing to reset), kill or stop it (SIGTERM to staticpodd
// alone, waiting for it to exit; its pods keep running, as under
// KillMode=process), start or restart it (waiting until it answers /healthz,
// as Type=notify waits for READY=1). It returns the exit code and output.
func systemctl(d *testdaemon.Daemon, args []string) (int, string) {
	if len(args) == 0 {
		return 1, "no command\n"
	}
	verb, rest := args[0], args[1:]
	if verb == "list-units" {
		if !d.Running() && contains(rest, "--state=running") {
			return 0, "0 loaded units listed.\n"
		}
		state := "running"
		if !d.Running() {
			state = "dead"
		}
		return 0, fmt.Sprintf("  UNIT %s loaded active %s staticpodd under node e2e\n", unit, state)
	}
	if len(rest) != 1 || strings.TrimSuffix(rest[0], ".service") != strings.TrimSuffix(unit, ".service") {
		return 5, fmt.Sprintf("Unit %s not found.\n", strings.Join(rest, " "))
	}
	switch verb {
	case "reset-failed":
	case "kill", "stop":
		d.Stop()
	case "start":
		if !d.Running() {
			d.Start()
		}
	case "restart":
		d.Stop()
		d.Start()
	case "is-active":
		if !d.Running() {
			return 3, "inactive\n"
		}
		return 0, "active\n"
	default:
		return 1, fmt.Sprintf("systemctl %s: not provided by this test\n", verb)
	}
	return 0, ""
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// systemctlShim is this binary run as systemctl: it sends its arguments to
// the test and prints its answer.
func systemctlShim(args []string) int {
	c, err := net.Dial("unix", os.Getenv(unitSockEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "systemctl (node e2e):", err)
		return 1
	}
	defer c.Close()
	if _, err := io.WriteString(c, strings.Join(args, "\x00")); err != nil {
		fmt.Fprintln(os.Stderr, "systemctl (node e2e):", err)
		return 1
	}
	c.(*net.UnixConn).CloseWrite()
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "systemctl (node e2e): no answer:", err)
		return 1
	}
	code, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		fmt.Fprintln(os.Stderr, "systemctl (node e2e): bad answer:", line)
		return 1
	}
	io.Copy(os.Stdout, r)
	return code
}

// sudoShim is this binary run as sudo: the test runs as root already, so it
// runs its arguments.
func sudoShim(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "sudo (node e2e): no command")
		return 1
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "sudo (node e2e):", err)
		return 1
	}
	err = syscall.Exec(path, args, os.Environ())
	fmt.Fprintln(os.Stderr, "sudo (node e2e):", err)
	return 1
}
