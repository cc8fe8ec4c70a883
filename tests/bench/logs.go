package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// logResult is what one log copy measured.
type logResult struct {
	name     string
	mb       float64 // of container output
	mbps     float64 // copied into the log, first entry's time to last's
	cpuPerMB float64 // ms of the monitor's CPU (user + system) per MB
	files    int
	mem      procMem // the monitor's, once done
}

// benchLogs measures the monitor's copy of a container's output into its CRI
// log, with rotation off and with rotation by 10 MiB with gzip. A busybox
// container writes mb MB of numbered 100-byte lines as fast as it can
// (`seq -s`, about 190 MB/s into a pipe here), then stays. Throughput is the
// output's size over the time between the first entry's timestamp and the
// last's; CPU is the monitor's utime + stime (its gzip helpers' included)
// once the last line is written
// and every rotated file but the newest is compressed, and memory its RSS
// then. Rotation keeps 50
// files, so that none is removed before it is compressed: every byte is
// copied, rotated and gzipped.
func benchLogs(bin, image, dir string, mb int) ([]logResult, error) {
	var out []logResult
	for i, v := range []struct{ name, cfg string }{
		{"rotation off (containerLogMaxSize: -1)", "containerLogMaxSize: \"-1\"\n"},
		{"rotation on (10Mi, gzip)", "containerLogMaxSize: 10Mi\ncontainerLogMaxFiles: 50\n"},
	} {
		r, err := benchLogCopy(bin, image, filepath.Join(dir, fmt.Sprintf("logs%d", i)), v.cfg, mb)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		r.name = v.name
		out = append(out, r)
	}
	return out, nil
}

func benchLogCopy(bin, image, dir, extraCfg string, mb int) (logResult, error) {
	root, manifests, logsDir := filepath.Join(dir, "root"), filepath.Join(dir, "manifests"), filepath.Join(dir, "logs")
	runDir := filepath.Join("/run", "staticpodd-bench-"+filepath.Base(dir))
	for _, d := range []string{root, manifests, logsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return logResult{}, err
		}
	}
	defer os.RemoveAll(runDir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return logResult{}, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
address: 127.0.0.1
readOnlyPort: %d
podLogsDir: %s
cgroupRoot: /staticpodd-bench
%s`, manifests, port, logsDir, extraCfg)), 0o644)
	common := []string{"--root-dir", root, "--run-dir", runDir}
	if out, err := exec.Command(bin, append([]string{"images", "import", image}, common...)...).CombinedOutput(); err != nil {
		return logResult{}, fmt.Errorf("import: %v: %s", err, out)
	}
	var logs bytes.Buffer
	d := exec.Command(bin, append([]string{"run", "--config", cfg, "--hostname-override", "bench"}, common...)...)
	d.Stdout, d.Stderr = &logs, &logs
	if err := d.Start(); err != nil {
		return logResult{}, err
	}
	podsURL := fmt.Sprintf("http://127.0.0.1:%d/pods", port)
	type pod struct {
		Metadata struct{ Name, UID string }
		Status   struct {
			ContainerStatuses []struct {
				ContainerID string
				State       struct{ Running *struct{} }
			}
		}
	}
	pods := func() []pod {
		resp, err := http.Get(podsURL)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var list struct{ Items []pod }
		json.NewDecoder(resp.Body).Decode(&list)
		return list.Items
	}
	defer func() {
		os.Remove(filepath.Join(manifests, "flood.yaml"))
		poll(60*time.Second, func() bool { return len(pods()) == 0 })
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/staticpodd-bench")
		for _, dir := range dirs {
			os.Remove(dir)
		}
	}()
	lines := mb * 1e6 / 100
	pad := " " + strings.Repeat("x", 90) + "\n"
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: flood}
spec:
  hostNetwork: true
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", %q]
`, fmt.Sprintf("trap 'exit 0' TERM; seq -s '%s' 1 %d; echo done; while true; do sleep 1 & wait $!; done", pad, lines))
	tmp := filepath.Join(dir, "flood.yaml")
	if err := os.WriteFile(tmp, []byte(manifest), 0o644); err != nil {
		return logResult{}, err
	}
	if err := os.Rename(tmp, filepath.Join(manifests, "flood.yaml")); err != nil {
		return logResult{}, err
	}
	var p pod
	if err := poll(60*time.Second, func() bool {
		ps := pods()
		if len(ps) != 1 || len(ps[0].Status.ContainerStatuses) != 1 || ps[0].Status.ContainerStatuses[0].State.Running == nil {
			return false
		}
		p = ps[0]
		return true
	}); err != nil {
		return logResult{}, fmt.Errorf("pod not running: %v\n%s", err, logs.String())
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "staticpodd://")
	monitor := monitorPid(runDir, id)
	if monitor == 0 {
		return logResult{}, fmt.Errorf("no monitor of container %s", id)
	}
	live := filepath.Join(logsDir, fmt.Sprintf("default_%s_%s", p.Metadata.Name, p.Metadata.UID), "main", "0.log")
	var files []logfiles.RotatedLog
	if err := poll(5*time.Minute, func() bool {
		data, err := os.ReadFile(live)
		if err != nil || !bytes.HasSuffix(data, []byte(" stdout F done\n")) {
			return false
		}
		rotated, _, err := logfiles.RotatedLogs(live)
		if err != nil {
			return false
		}
		for _, r := range rotated[:max(len(rotated)-1, 0)] {
			if !r.Compressed {
				return false
			}
		}
		files = append(rotated, logfiles.RotatedLog{Path: live})
		return true
	}); err != nil {
		return logResult{}, fmt.Errorf("log not written: %v", err)
	}
	cpu, err := cpuOf(monitor)
	if err != nil {
		return logResult{}, err
	}
	mem := memOf(monitor)
	// Rotation may have removed the oldest files: the rate is of those left.
	var kept int
	for _, f := range files {
		n, err := countLines(f)
		if err != nil {
			return logResult{}, err
		}
		kept += n
	}
	first, err := firstEntryTime(files[0])
	if err != nil {
		return logResult{}, err
	}
	last, err := lastEntryTime(live)
	if err != nil {
		return logResult{}, err
	}
	size := float64(lines*100) / 1e6
	return logResult{
		mb:       size,
		mbps:     float64(kept*100) / 1e6 / last.Sub(first).Seconds(),
		cpuPerMB: float64(cpu.Milliseconds()) / size,
		files:    len(files),
		mem:      mem,
	}, nil
}

func openLog(f logfiles.RotatedLog) (io.Reader, func() error, error) {
	file, err := os.Open(f.Path)
	if err != nil {
		return nil, nil, err
	}
	if !f.Compressed {
		return file, file.Close, nil
	}
	zr, err := gzip.NewReader(file)
	if err != nil {
		file.Close()
		return nil, nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return zr, file.Close, nil
}

func countLines(f logfiles.RotatedLog) (int, error) {
	r, done, err := openLog(f)
	if err != nil {
		return 0, err
	}
	defer done()
	n, buf := 0, make([]byte, 256<<10)
	for {
		m, err := r.Read(buf)
		n += bytes.Count(buf[:m], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f.Path, err)
		}
	}
}

// monitorPid finds the monitor of container id of the daemon of runDir.
func monitorPid(runDir, id string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(b, []byte("staticpodd-monitor\x00")) ||
			!bytes.Contains(b, []byte(filepath.Join(runDir, "containers", id)+"\x00")) {
			continue
		}
		var pid int
		fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
		return pid
	}
	return 0
}

// cpuOf returns the user and system CPU time pid has used, with that of its
// children it has reaped: the monitor's gzip helpers.
func cpuOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after "(comm)": state is the first, utime the 12th, stime the
	// 13th, cutime and cstime the 14th and 15th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	const clockTick = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / clockTick, nil
}

func entryTime(line []byte) (time.Time, error) {
	ts, _, _ := bytes.Cut(line, []byte{' '})
	return time.Parse(time.RFC3339Nano, string(ts))
}

func firstEntryTime(f logfiles.RotatedLog) (time.Time, error) {
	r, done, err := openLog(f)
	if err != nil {
		return time.Time{}, err
	}
	defer done()
	line, err := bufio.NewReader(r).ReadBytes('\n')
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", f.Path, err)
	}
	return entryTime(line)
}

func lastEntryTime(path string) (time.Time, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	return entryTime(data[bytes.LastIndexByte(data, '\n')+1:])
}
