package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// hostileInput is a manifest file or a URL answer whose reading the daemon's
// memory must survive.
type hostileInput struct {
	name string
	file []byte           // a manifest file of these bytes, or
	url  http.HandlerFunc // the URL's answer
}

// benchHostileMemory measures the daemon's peak RSS above idle while it reads
// hostile manifests: 50 MiB files and bodies (announced or not), a body that
// never ends, and a manifest just under the 10 MiB limit, which is parsed.
// Each input gets a daemon of its own, started on an empty directory and a
// URL serving an empty PodList, so that no input pays for what an earlier one
// left in the heap: idle is its VmRSS once it has polled the URL twice; the
// cost is its VmHWM (reset by clear_refs 5 at idle) once it has dealt with the
// input: the problem naming the file is on the CLI socket, or the URL was
// asked again after the request that got the answer.
func benchHostileMemory(bin, image string, runs int) error {
	const mib = 1 << 20
	pad := func(n int, head, tail string) []byte {
		b := append([]byte(head), bytes.Repeat([]byte("x"), n-len(head)-len(tail))...)
		return append(b, tail...)
	}
	under := pad(10*mib-100, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: under\n  annotations:\n    pad: \"", "\"\nspec:\n  containers: [{name: c, image: busybox, imagePullPolicy: IfNotPresent}]\n")
	big := pad(50*mib, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n  annotations:\n    pad: \"", "\"\n")
	inputs := []hostileInput{
		{name: "a 50 MiB file", file: big},
		{name: "a 50 MiB body, Content-Length announced", url: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			w.Write(big)
		}},
		{name: "a 50 MiB body, chunked", url: func(w http.ResponseWriter, r *http.Request) { w.Write(big) }},
		{name: "a body that never ends", url: func(w http.ResponseWriter, r *http.Request) {
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for sent, stop := 0, time.Now().Add(30*time.Second); sent < 1<<30 && time.Now().Before(stop); sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}},
		{name: "a file just under 10 MiB (parsed)", file: under},
		{name: "a body just under 10 MiB (parsed)", url: func(w http.ResponseWriter, r *http.Request) { w.Write(under) }},
	}
	fmt.Printf("\nthe daemon's peak RSS above idle while it reads hostile manifests, %d runs each, a fresh daemon each run:\n\n", runs)
	fmt.Printf("| input | peak above idle (each run) | idle RSS |\n|---|---|---|\n")
	for _, in := range inputs {
		var peaks []string
		var idle int64
		for range runs {
			peak, idleKiB, err := hostileOnce(bin, image, in)
			if err != nil {
				return fmt.Errorf("%s: %w", in.name, err)
			}
			idle = idleKiB
			peaks = append(peaks, strconv.FormatInt(peak>>10, 10))
		}
		fmt.Printf("| %s | %s MiB | %d MiB |\n", in.name, strings.Join(peaks, ", "), idle>>10)
	}
	return nil
}

func hostileOnce(bin, image string, in hostileInput) (peak, idle int64, err error) {
	dir, err := os.MkdirTemp("", "staticpodd-bench-hostile-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	empty := `{"apiVersion":"v1","kind":"PodList","items":[]}`
	d, err := startURLDaemon(bin, image, dir, "200ms", "1h", empty)
	if err != nil {
		return 0, 0, err
	}
	defer d.stop()
	pid := d.cmd.Process.Pid
	h := d.srv.requests()
	if err := poll(10*time.Second, func() bool { return d.srv.requests() >= h+2 }); err != nil {
		return 0, 0, fmt.Errorf("the URL was not polled: %w", err)
	}
	idle = statusKiB(pid, "VmRSS")
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return 0, 0, err
	}
	if in.file != nil {
		manifests := filepath.Join(dir, "empty")
		p := filepath.Join(manifests, "hostile.yaml")
		tmp := filepath.Join(dir, "hostile.yaml.tmp")
		if err := os.WriteFile(tmp, in.file, 0o644); err != nil {
			return 0, 0, err
		}
		if err := os.Rename(tmp, p); err != nil {
			return 0, 0, err
		}
		sock := socketClient(filepath.Join(d.runDir, "staticpodd.sock"))
		if err := poll(30*time.Second, func() bool { return hasProblem(sock, p) }); err != nil {
			return 0, 0, fmt.Errorf("no problem for %s: %w\n%s", p, err, d.logs.String())
		}
	} else {
		d.srv.mu.Lock()
		d.srv.answer = in.url
		d.srv.mu.Unlock()
		// The request under way may have had the old answer: the one after
		// it got the new one, and the one after that began once it was dealt
		// with.
		h := d.srv.requests()
		if err := poll(60*time.Second, func() bool { return d.srv.requests() >= h+3 }); err != nil {
			return 0, 0, fmt.Errorf("the URL was not polled again: %w", err)
		}
	}
	return statusKiB(pid, "VmHWM") - idle, idle, nil
}

func socketClient(sock string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, "unix", sock)
		},
	}}
}

func hasProblem(c *http.Client, origin string) bool {
	resp, err := c.Get("http://staticpodd/problems")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var problems []struct{ Origin string }
	if json.NewDecoder(resp.Body).Decode(&problems) != nil {
		return false
	}
	for _, p := range problems {
		if p.Origin == origin {
			return true
		}
	}
	return false
}

// statusKiB is a field of /proc/<pid>/status in KiB: VmRSS, VmHWM.
func statusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			n, _ := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			return n
		}
	}
	return 0
}
