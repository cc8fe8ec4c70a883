package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// manifestCase is one hostile file in the manifest directory.
type manifestCase struct {
	name string
	file string // name in the manifest dir
	// make creates it at p (a manifest dir entry); c is the canary.
	make func(t *testing.T, c *canary, p string)
	// problem, for a file the daemon reads, is a regexp the daemon's problem
	// for it and validate's error must match; "" for a file the daemon does
	// not read (not a regular file), which it must skip with a warning naming
	// it, or for a usable manifest (runs set).
	problem string
	// runs, warning: see corpusCase.
	runs, warning string
	big           bool // 50 MiB or more: its peak memory is held to 64 MiB above idle
}

// sleeper is a pod that runs until stopped.
func sleeper(name string) string { return pod(name, "", "") }

func content(s string) func(t *testing.T, c *canary, p string) {
	return func(t *testing.T, c *canary, p string) { write(t, p, s, 0o644) }
}

func symlinkTo(target func(c *canary) string) func(t *testing.T, c *canary, p string) {
	return func(t *testing.T, c *canary, p string) {
		if err := os.Symlink(target(c), p); err != nil {
			t.Fatal(err)
		}
	}
}

// secretFile is a secret-looking file in the canary dir, holding the canary's
// marker; the manifest is a symlink to it.
func secretFile(name, format string) func(t *testing.T, c *canary, p string) {
	return func(t *testing.T, c *canary, p string) {
		target := filepath.Join(c.Dir, "secrets", name)
		write(t, target, strings.ReplaceAll(format, "MARKER", c.Marker), 0o600)
		c.before = tree(t, c.Dir)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

// hostileManifests is the corpus of hostile bytes (hostileCorpus), each
// written as a file, and the hostile files that are more than bytes:
// symlinks to secrets, FIFOs, sockets, devices, a file that cannot be read.
func hostileManifests() []manifestCase {
	var cases []manifestCase
	for _, cc := range hostileCorpus() {
		body := cc.body
		cases = append(cases, manifestCase{name: cc.name, file: cc.file, problem: cc.problem, runs: cc.runs, warning: cc.warning,
			big: strings.Contains(cc.name, "50MiB") || strings.Contains(cc.name, "100MiB"),
			make: func(t *testing.T, c *canary, p string) {
				b := body()
				// Written elsewhere, dated an hour ago and renamed in: the daemon
				// reads it whole and does not wait for it to settle.
				tmp := filepath.Join(filepath.Dir(c.Dir), filepath.Base(p)+".tmp")
				if err := os.WriteFile(tmp, b, 0o644); err != nil {
					t.Fatal(err)
				}
				old := time.Now().Add(-time.Hour)
				os.Chtimes(tmp, old, old)
				if err := os.Rename(tmp, p); err != nil {
					t.Fatal(err)
				}
			}})
	}
	return append(cases, []manifestCase{
		{name: "secret/shadow", file: "shadow.yaml", make: secretFile("shadow", "root:$6$MARKER$MARKER:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n"), problem: `.`},
		{name: "secret/pem-key", file: "key.yaml", make: secretFile("key.pem", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,MARKER\n\nMIIEMARKERowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"), problem: `.`},
		{name: "secret/kubeconfig", file: "kubeconfig.yaml", make: secretFile("kubeconfig", "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user: {token: MARKER}\n"), problem: `kind: Unsupported value: "Config": supported values: "Pod"`},
		{name: "secret/env-file", file: "env.yaml", make: secretFile("env", "DB_USER=admin\nDB_PASSWORD=MARKER\n"), problem: `.`},
		{name: "secret/json-credentials", file: "creds.json", make: secretFile("creds.json", `{"type": "service_account", "private_key_id": "MARKER", "private_key": "MARKER"}`), problem: `.`},
		{name: "secret/htpasswd", file: "htpasswd.yaml", make: secretFile("htpasswd", "admin:$apr1$MARKER$MARKER\n"), problem: `.`},
		{name: "unreadable/read-fails", file: "eio.yaml", make: symlinkTo(func(*canary) string { return "/proc/self/mem" }), problem: `input/output error`},
		{name: "irregular/fifo", file: "fifo.yaml", make: func(t *testing.T, c *canary, p string) {
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "irregular/socket", file: "sock.yaml", make: func(t *testing.T, c *canary, p string) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := unix.Bind(fd, &unix.SockaddrUnix{Name: p}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "irregular/char-device", file: "zero.yaml", make: func(t *testing.T, c *canary, p string) {
			if err := unix.Mknod(p, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "irregular/block-device", file: "loop.yaml", make: func(t *testing.T, c *canary, p string) {
			if err := unix.Mknod(p, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0))); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "irregular/symlink-to-dev-zero", file: "zerolink.yaml", make: symlinkTo(func(*canary) string { return "/dev/zero" })},
		{name: "irregular/symlink-to-fifo-outside", file: "fifolink.yaml", make: func(t *testing.T, c *canary, p string) {
			fifo := filepath.Join(filepath.Dir(c.Dir), "outside.fifo")
			if err := unix.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(fifo, p); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "irregular/symlink-to-dir", file: "dirlink.yaml", make: symlinkTo(func(c *canary) string { return c.Dir })},
		{name: "irregular/dangling-symlink", file: "dangling.yaml", make: symlinkTo(func(c *canary) string { return filepath.Join(c.Dir, "nothing-here") })},
		{name: "usable/file-name-not-utf8", file: "pod-\xff.yaml", make: content(sleeper("oddname")), runs: "oddname"},
	}...)
}

// TestHostileManifests drops hostile files, one at a time, into the manifest
// directory of a daemon that runs a good pod. The good pod runs on
// untouched; every hostile regular file is reported as a problem naming it
// and the reason (or, usable, runs); files that are not regular are skipped
// with a warning and never opened, so nothing hangs; the secret a symlink
// points at shows nowhere (log, ps, /pods, /problems, validate); the
// daemon's peak memory is measured for each file and stays bounded, and it
// stops promptly. `staticpodd validate` says the same of each file, and of
// the directory, without hanging.
func TestHostileManifests(t *testing.T) {
	t.Parallel()
	d := testdaemon.New(t)
	c := plantCanary(t)
	cases := hostileManifests()
	d.WriteManifest("good.yaml", sleeper("good"))
	d.Start()
	good := d.WaitRunning("good", 30*time.Second)
	goodPID := containerInit(t, d, good)
	idle := rssKiB(t, d.PID(), "VmRSS")
	t.Logf("the daemon's RSS with the good pod running: %d MiB", idle>>10)

	var problems []problem
	peaks := map[string]int64{}
	for _, mc := range cases {
		p := filepath.Join(d.Manifests, mc.file)
		resetPeakRSS(t, d.PID())
		mc.make(t, c, p)
		switch {
		case mc.runs != "":
			d.WaitRunning(mc.runs, 60*time.Second)
		case mc.problem == "":
			d.Eventually(10*time.Second, "a warning about "+mc.file, func() error {
				if !regexp.MustCompile(`file="?` + regexp.QuoteMeta(strings.Trim(strconv.Quote(p), `"`)) + `\b`).MatchString(d.Output()) {
					return fmt.Errorf("no warning naming %s", p)
				}
				return nil
			})
		default:
			d.Eventually(10*time.Second, "a problem for "+mc.file, func() error {
				problems = getProblems(t, d)
				if _, ok := problemFor(problems, p); !ok {
					return fmt.Errorf("no problem for %s", p)
				}
				return nil
			})
		}
		peaks[mc.name] = rssKiB(t, d.PID(), "VmHWM")
	}
	problems = getProblems(t, d)
	out := d.Output()
	for _, mc := range cases {
		t.Run(mc.name, func(t *testing.T) {
			p := filepath.Join(d.Manifests, mc.file)
			above := peaks[mc.name] - idle
			t.Logf("the daemon's peak RSS reading it: %d MiB above idle", above>>10)
			if mc.big && above > 64<<10 {
				t.Errorf("reading %s took the daemon %d MiB above idle, want under 64 MiB", mc.file, above>>10)
			}
			pr, read := problemFor(problems, p)
			switch {
			case mc.runs != "":
				if read {
					t.Errorf("a usable manifest has a problem: %q", pr)
				}
				if mc.warning != "" && !regexp.MustCompile(mc.warning).MatchString(out) {
					t.Errorf("no warning matching %q in the daemon's log", mc.warning)
				}
			case mc.problem == "":
				if read {
					t.Errorf("a file that is not regular was read: problem %q", pr)
				}
			default:
				if !regexp.MustCompile(mc.problem).MatchString(pr) {
					t.Errorf("problem for %s is %q, want it to say %q", mc.file, pr, mc.problem)
				}
				t.Logf("problem: %.300s", pr)
			}
		})
	}

	t.Run("good-pod-untouched", func(t *testing.T) {
		now := d.Pod("good")
		if now == nil || now.UID != good.UID || now.DeletionTimestamp != nil || now.Status.ContainerStatuses[0].RestartCount != 0 || !testdaemon.ProcAlive(goodPID) {
			t.Errorf("the good pod changed: %+v", now)
		}
	})

	t.Run("log-not-forged", func(t *testing.T) {
		// The escape sequence and newline of names/escape-sequences are
		// escaped wherever the daemon writes them.
		if strings.Contains(out, "\x1b") || regexp.MustCompile(`(?m)^level=ERROR msg=forged`).MatchString(out) {
			t.Errorf("the daemon's log carries a raw escape sequence or a forged line")
		}
	})

	t.Run("secret-never-shown", func(t *testing.T) {
		c.noSecret(t, "the daemon's log", d.Output())
		c.noSecret(t, "/problems", mustGet(t, d.SocketClient(), "http://staticpodd/problems"))
		c.noSecret(t, "/pods on the read-only port", mustGet(t, d.Client(), d.URL("/pods")))
		for _, args := range [][]string{{"ps"}, {"ps", "-o", "wide"}, {"ps", "-o", "json"}} {
			psOut, err := d.CLIErr(args...)
			if err != nil {
				t.Errorf("staticpodd %v: %v\n%s", args, err, psOut)
			}
			c.noSecret(t, "staticpodd "+strings.Join(args, " "), psOut)
		}
	})

	t.Run("validate", func(t *testing.T) {
		for _, mc := range cases {
			if mc.problem == "" {
				continue
			}
			p := filepath.Join(d.Manifests, mc.file)
			vout, code := validate(t, p)
			if code != 1 || !regexp.MustCompile(`(?m)^error: `+regexp.QuoteMeta(p)+`: .*(`+mc.problem+`)`).MatchString(vout) {
				t.Errorf("validate %s: exit %d, want 1 and an error naming the file and saying %q:\n%.2000s", mc.file, code, mc.problem, vout)
			}
			c.noSecret(t, "validate "+mc.file, vout)
		}
		// The directory as a whole fails, and lists every entry.
		vout, code := validate(t, d.Manifests)
		if code != 1 {
			t.Errorf("validate of the directory: exit %d, want 1:\n%.2000s", code, vout)
		}
		c.noSecret(t, "validate of the directory", vout)

		// A directory of entries that are not regular files and one good
		// manifest: validate skips them without opening them.
		dir := t.TempDir()
		for _, mc := range cases {
			if mc.problem == "" && mc.runs == "" {
				if err := os.Rename(filepath.Join(d.Manifests, mc.file), filepath.Join(dir, mc.file)); err != nil {
					t.Fatal(err)
				}
			}
		}
		write(t, filepath.Join(dir, "good.yaml"), sleeper("good"), 0o644)
		vout, code = validate(t, dir)
		if code != 0 || !strings.Contains(vout, "1 file(s), 1 pod(s), 0 error(s)") {
			t.Errorf("validate of a directory of FIFOs, sockets, devices and a good manifest: exit %d:\n%s", code, vout)
		}
	})

	t.Run("bounded", func(t *testing.T) {
		if resp, err := d.Client().Get(d.URL("/healthz")); err != nil {
			t.Errorf("/healthz: %v", err)
		} else {
			resp.Body.Close()
		}
		start := time.Now()
		d.Signal(syscall.SIGTERM)
		select {
		case <-d.Exited():
			t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Errorf("the daemon did not stop within 10s of SIGTERM")
		}
	})
	c.check(t)
}

// containerInit is the host PID of the pod's first container's process: of
// the processes in the container's cgroup, the one whose parent is not in it
// (the others are its children, such as the sleeper's sleep, whose PID may
// be the lower one once PIDs wrap around).
func containerInit(t *testing.T, d *testdaemon.Daemon, p *v1.Pod) int {
	t.Helper()
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "staticpodd://")
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids", d.Cgroup, "pod"+string(p.UID), id, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	in := map[int]bool{}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		in[pid] = true
	}
	for pid := range in {
		if ppid, _, ok := procStat(pid); ok && !in[ppid] {
			return pid
		}
	}
	t.Fatalf("no process of the container %s has its parent outside it: %v", id, in)
	return 0
}

// procStat is pid's parent and start time (in clock ticks since boot), from
// /proc/<pid>/stat; ok is false when pid is gone.
func procStat(pid int) (ppid int, start uint64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command name, in parentheses, may hold anything: fields start
	// after its last ')'. Then: state, ppid, ..., starttime (the 22nd).
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 20 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	start, _ = strconv.ParseUint(f[19], 10, 64)
	return ppid, start, true
}

// resetPeakRSS makes VmHWM the current RSS (proc(5): clear_refs 5).
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}

type problem struct {
	Origin string `json:"origin"`
	Error  string `json:"error"`
	// Warning: the manifest is used all the same (a duplicate key, a
	// negative grace period), shown in ps and not a problem of its own.
	Warning bool `json:"warning"`
}

func getProblems(t *testing.T, d *testdaemon.Daemon) []problem {
	t.Helper()
	// A new connection each time, closed after: the CLI socket serves 32 at
	// once, and a poll that left each one idle would fill them up.
	c := d.SocketClient()
	c.Transport.(*http.Transport).DisableKeepAlives = true
	c.Timeout = 30 * time.Second
	resp, err := c.Get("http://staticpodd/problems")
	if err != nil {
		// A daemon that does not answer: its goroutines say where it is stuck.
		d.Signal(syscall.SIGQUIT)
		select {
		case <-d.Exited():
		case <-time.After(10 * time.Second):
		}
		t.Fatalf("GET /problems: %v\n%s", err, d.Output())
	}
	defer resp.Body.Close()
	var out []problem
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("decode /problems: %v", err)
	}
	return out
}

func problemFor(problems []problem, origin string) (string, bool) {
	for _, p := range problems {
		if p.Origin == origin && !p.Warning {
			return p.Error, true
		}
	}
	return "", false
}

func mustGet(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return string(b)
}

// validate runs `staticpodd validate` on paths; one still running after 30s is
// a hang and fails the test.
func validate(t *testing.T, paths ...string) (string, int) {
	t.Helper()
	out, code, _ := validateUsage(t, paths...)
	return out, code
}

// validateUsage is validate that also returns the peak RSS of the process in KiB.
func validateUsage(t *testing.T, paths ...string) (string, int, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testdaemon.Bin, append([]string{"validate", "--hostname-override", "node"}, paths...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("validate %v hung for 30s:\n%s", paths, out.String())
	}
	var rss int64
	if cmd.ProcessState != nil {
		rss = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0, rss
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode(), rss
	}
	t.Fatal(err)
	return "", -1, 0
}

// rssKiB is a memory figure of pid's from /proc/<pid>/status: VmRSS (now)
// or VmHWM (the high-water mark), in KiB.
func rssKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestHostileManifestPath points staticPodPath at a FIFO, as a manifest file
// replaced by one (or a symlink to one) would. The daemon must not block
// opening it: it says why the path is unusable and stops on SIGTERM.
func TestHostileManifestPath(t *testing.T) {
	t.Parallel()
	t.Run("single-file-path-is-a-fifo", func(t *testing.T) {
		d := testdaemon.New(t)
		fifo := filepath.Join(d.Manifests, "pod.yaml")
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(d.Config)
		if err != nil {
			t.Fatal(err)
		}
		cfg = bytes.Replace(cfg, []byte("staticPodPath: "+d.Manifests), []byte("staticPodPath: "+fifo), 1)
		write(t, d.Config, string(cfg), 0o644)
		// Before the harness's cleanup: take the FIFO away and wake whatever
		// blocks opening it, so the daemon can stop.
		t.Cleanup(func() {
			unblockFIFO(fifo)
			if d.PID() != 0 {
				select {
				case <-d.Exited():
				case <-time.After(10 * time.Second):
				}
			}
		})

		d.Start()
		// fileCheckFrequency is 2s: two relists.
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(d.Output(), fifo) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(d.Output(), fifo) {
			t.Errorf("5s after start the daemon has said nothing about %s (a FIFO):\n%s", fifo, d.Output())
		}
		start := time.Now()
		d.Signal(syscall.SIGTERM)
		select {
		case <-d.Exited():
			t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Errorf("the daemon did not stop within 10s of SIGTERM")
		}
	})
}

// unblockFIFO removes the FIFO at p and wakes a reader blocked opening it.
func unblockFIFO(p string) {
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_NONBLOCK, 0)
	if err != nil {
		os.Remove(p)
		return
	}
	os.Remove(p)
	time.Sleep(200 * time.Millisecond)
	unix.Close(fd)
}
