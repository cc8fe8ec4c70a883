// Command idleconns measures what idle keep-alive connections to the read-only
// port cost the daemon: it starts staticpodd with no pods, opens -conns
// connections to the read-only port that each send one request and then stay
// open, and prints the daemon's RSS and open file descriptors before and after,
// how many connections were answered, and whether the CLI socket still answers.
// RSS includes the binary's file pages, which depend on where the binary lies
// and what of it the page cache holds: compare binaries from the same
// directory, and the anonymous part.
//
//	go run ./tests/bench/idleconns -staticpodd bin/staticpodd -conns 2000
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("staticpodd", os.Getenv("STATICPODD_BIN"), "staticpodd binary")
	conns := flag.Int("conns", 2000, "idle connections to open to the read-only port")
	nofile := flag.Int("nofile", 0, "run the daemon under this open-file limit (soft and hard), with prlimit(1); 0 = inherit")
	flag.Parse()
	if err := run(*bin, *conns, *nofile); err != nil {
		fmt.Fprintln(os.Stderr, "idleconns:", err)
		os.Exit(1)
	}
}

func run(bin string, n, nofile int) error {
	if bin == "" {
		return fmt.Errorf("need -staticpodd")
	}
	dir, err := os.MkdirTemp("", "staticpodd-idleconns-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	runDir := filepath.Join("/run", filepath.Base(dir))
	defer os.RemoveAll(runDir)
	manifests := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
address: 127.0.0.1
readOnlyPort: %d
podLogsDir: %s
cgroupRoot: /staticpodd-idleconns
`, manifests, port, filepath.Join(dir, "logs"))), 0o644); err != nil {
		return err
	}
	args := []string{bin, "run", "--config", cfg, "--hostname-override", "idleconns",
		"--root-dir", filepath.Join(dir, "root"), "--run-dir", runDir}
	if nofile > 0 {
		args = append([]string{"prlimit", fmt.Sprintf("--nofile=%d:%d", nofile, nofile), "--"}, args...)
	}
	var logs bytes.Buffer
	d := exec.Command(args[0], args[1:]...)
	d.Stdout, d.Stderr = &logs, &logs
	if err := d.Start(); err != nil {
		return err
	}
	defer func() {
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/staticpodd-idleconns")
		for _, dir := range dirs {
			os.Remove(dir)
		}
	}()
	pid := d.Process.Pid // prlimit execs the daemon in place
	sock := filepath.Join(runDir, "staticpodd.sock")
	cli := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	up := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cliHealthz(cli) == nil {
			up = true
			break
		}
	}
	if !up {
		return fmt.Errorf("daemon did not come up:\n%s", logs.String())
	}
	before := measure(pid)

	// Each connection sends one keep-alive request and waits up to 3s for
	// the answer; answered or not, it then stays open and idle.
	var (
		mu       sync.Mutex
		open     []net.Conn
		answered int
		failed   int
		wg       sync.WaitGroup
		slots    = make(chan struct{}, 64)
	)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				return
			}
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			mu.Lock()
			defer mu.Unlock()
			open = append(open, c)
			if err == nil {
				resp.Body.Close()
				answered++
			}
		}()
	}
	wg.Wait()
	time.Sleep(time.Second) // let the daemon's goroutines and GC settle
	after := measure(pid)
	t0 := time.Now()
	cliErr := cliHealthz(cli)
	cliTook := time.Since(t0)

	fmt.Printf("%s, open-file limit %s, %d connections to the read-only port\n\n",
		strings.TrimSpace(version(bin)), limitOf(pid), n)
	fmt.Printf("| | RSS | of which anon | open fds |\n|---|---|---|---|\n")
	fmt.Printf("| idle daemon | %.1f MiB | %.1f MiB | %d |\n", mib(before.rss), mib(before.anon), before.fds)
	fmt.Printf("| with the connections open | %.1f MiB | %.1f MiB | %d |\n\n", mib(after.rss), mib(after.anon), after.fds)
	fmt.Printf("connections opened %d (dial failed %d), answered within 3s %d, left waiting %d\n",
		len(open), failed, answered, len(open)-answered)
	if cliErr != nil {
		fmt.Printf("CLI socket /healthz: FAILED after %s: %v\n", cliTook.Round(time.Millisecond), cliErr)
	} else {
		fmt.Printf("CLI socket /healthz: ok in %s\n", cliTook.Round(time.Millisecond))
	}
	for _, c := range open {
		c.Close()
	}
	return nil
}

func cliHealthz(c *http.Client) error {
	resp, err := c.Get("http://staticpodd/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

type usage struct {
	rss, anon int64
	fds       int
}

func measure(pid int) usage {
	var u usage
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			var kb int64
			fmt.Sscan(f[1], &kb)
			switch f[0] {
			case "VmRSS:":
				u.rss = kb << 10
			case "RssAnon:":
				u.anon = kb << 10
			}
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	u.fds = len(fds)
	return u
}

func limitOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			if f := strings.Fields(line); len(f) >= 4 {
				return f[3]
			}
		}
	}
	return "?"
}

func version(bin string) string {
	out, _ := exec.Command(bin, "version").Output()
	first, _, _ := strings.Cut(string(out), "\n") // the build's features follow
	return first
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
