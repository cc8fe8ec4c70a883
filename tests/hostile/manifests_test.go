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

	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// manifestCase is one hostile file in the manifest directory.
type manifestCase struct {
	name string
	file string // name in the manifest dir
	// make creates it at p (a manifest dir entry); c is the canary.
	make func(t *testing.T, c *canary, p string)
	// problem, for a regular file, is a regexp the daemon's problem for it and
	// validate's error must match; "" for a file the daemon does not read
	// (not a regular file), which it must skip with a warning naming it.
	problem string
}

// sleeper is a pod that runs until stopped.
func sleeper(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`, name)
}

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

// billionLaughs is the classic entity-expansion bomb in YAML anchors: nine
// levels of nine aliases, a billion "lol"s if expanded.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 9; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.Repeat(p+", ", 8)+p)
	}
	return b.String()
}

func hostileManifests() []manifestCase {
	notYAML := `not YAML or JSON`
	return []manifestCase{
		{name: "yaml-bomb/billion-laughs", file: "bomb.yaml", make: content(billionLaughs()), problem: `excessive aliasing`},
		{name: "deep-nesting/yaml-flow", file: "deep.yaml", make: content(strings.Repeat("[", 4<<20) + strings.Repeat("]", 4<<20)), problem: `exceeded max depth`},
		{name: "deep-nesting/json", file: "deep.json", make: content(strings.Repeat(`{"a":`, 1<<20) + "1" + strings.Repeat("}", 1<<20)), problem: `exceeded max depth`},
		{name: "deep-nesting/block-maps", file: "deepmap.yaml", make: func(t *testing.T, c *canary, p string) {
			// Indentation makes depth cost its square in bytes: 4000 levels
			// fit under the 10 MiB limit.
			var b strings.Builder
			for i := range 4000 {
				fmt.Fprintf(&b, "%sa:\n", strings.Repeat(" ", i))
			}
			write(t, p, b.String(), 0o644)
		}, problem: `apiVersion: Required value: want v1`},
		{name: "huge/100MB", file: "huge.yaml", make: func(t *testing.T, c *canary, p string) {
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			f.WriteString(sleeper("huge") + "    env:\n    - {name: PAD, value: \"")
			line := bytes.Repeat([]byte("x"), 1<<20)
			for range 100 {
				if _, err := f.Write(line); err != nil {
					t.Fatal(err)
				}
			}
			f.WriteString("\"}\n")
		}, problem: `larger than 10485760 bytes`},
		{name: "non-utf8/latin1-content", file: "latin1.yaml", make: content("apiVersion: v1\nkind: Pod\nmetadata:\n  name: caf\xe9\n"), problem: `UTF-8`},
		{name: "non-utf8/utf16-without-bom", file: "utf16.yaml", make: content(string(utf16LE(sleeper("utf16")))), problem: notYAML},
		{name: "binary/nul-bytes", file: "nul.yaml", make: content(strings.Repeat("\x00", 4096)), problem: notYAML},
		{name: "empty/zero-bytes", file: "empty.yaml", make: content(""), problem: `empty manifest`},
		{name: "empty/whitespace", file: "blank.yaml", make: content("\n \n\t\n"), problem: `empty manifest`},
		{name: "secret/shadow", file: "shadow.yaml", make: secretFile("shadow", "root:$6$MARKER$MARKER:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n"), problem: `.`},
		{name: "secret/pem-key", file: "key.yaml", make: secretFile("key.pem", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,MARKER\n\nMIIEMARKERowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"), problem: `.`},
		{name: "secret/kubeconfig", file: "kubeconfig.yaml", make: secretFile("kubeconfig", "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user: {token: MARKER}\n"), problem: `kind: Unsupported value: "Config": supported values: "Pod"`},
		{name: "secret/env-file", file: "env.yaml", make: secretFile("env", "DB_USER=admin\nDB_PASSWORD=MARKER\n"), problem: `.`},
		{name: "secret/json-credentials", file: "creds.json", make: secretFile("creds.json", `{"type": "service_account", "private_key_id": "MARKER", "private_key": "MARKER"}`), problem: `.`},
		{name: "secret/htpasswd", file: "htpasswd.yaml", make: secretFile("htpasswd", "admin:$apr1$MARKER$MARKER\n"), problem: `.`},
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
	}
}

func utf16LE(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r), byte(r>>8))
	}
	return b
}

// TestHostileManifests puts hostile files next to a good manifest in one
// daemon's manifest directory. The good pod runs; every hostile regular file is
// reported as a problem naming it and the reason; files that are not regular
// are skipped with a warning and never opened, so nothing hangs; the secret a
// symlink points at shows nowhere (log, ps, /pods, /problems, validate); the
// daemon stays small and stops promptly. `staticpodd validate` says the same
// of each file, and of the directory, without hanging.
func TestHostileManifests(t *testing.T) {
	t.Parallel()
	d := testdaemon.New(t)
	c := plantCanary(t)
	cases := hostileManifests()
	for _, mc := range cases {
		mc.make(t, c, filepath.Join(d.Manifests, mc.file))
	}
	d.WriteManifest("good.yaml", sleeper("good"))
	// A file name that is not UTF-8 holding a good pod.
	badName := "pod-\xff.yaml"
	write(t, filepath.Join(d.Manifests, badName), sleeper("oddname"), 0o644)

	d.Start()
	d.WaitRunning("good", 30*time.Second)
	d.WaitRunning("oddname", 10*time.Second)
	var problems []problem
	d.Eventually(20*time.Second, "a problem for every hostile manifest", func() error {
		problems = getProblems(t, d)
		for _, mc := range cases {
			if mc.problem == "" {
				continue
			}
			if _, ok := problemFor(problems, filepath.Join(d.Manifests, mc.file)); !ok {
				return fmt.Errorf("no problem for %s in %+v", mc.file, problems)
			}
		}
		return nil
	})
	out := d.Output()
	for _, mc := range cases {
		t.Run(mc.name, func(t *testing.T) {
			p := filepath.Join(d.Manifests, mc.file)
			if mc.problem == "" {
				if pr, ok := problemFor(problems, p); ok {
					t.Errorf("a file that is not regular was read: problem %q", pr)
				}
				if !regexp.MustCompile(`file=` + regexp.QuoteMeta(p) + `\b`).MatchString(out) {
					t.Errorf("the daemon does not say it skips %s:\n%s", p, out)
				}
				return
			}
			pr, _ := problemFor(problems, p)
			if !regexp.MustCompile(mc.problem).MatchString(pr) {
				t.Errorf("problem for %s is %q, want it to say %q", mc.file, pr, mc.problem)
			}
			t.Logf("problem: %s", pr)
		})
	}

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
				t.Errorf("validate %s: exit %d, want 1 and an error naming the file and saying %q:\n%s", mc.file, code, mc.problem, vout)
			}
			c.noSecret(t, "validate "+mc.file, vout)
		}
		// The directory as a whole fails. (A dangling symlink in it makes
		// validate stop listing it; the daemon goes on.)
		vout, code := validate(t, d.Manifests)
		if code != 1 {
			t.Errorf("validate of the directory: exit %d, want 1:\n%s", code, vout)
		}
		c.noSecret(t, "validate of the directory", vout)

		// A directory of entries that are not regular files and one good
		// manifest: validate skips them without opening them.
		dir := t.TempDir()
		for _, mc := range cases {
			if mc.problem == "" && mc.file != "dangling.yaml" {
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
		kb := peakRSSKiB(t, d.PID())
		t.Logf("the daemon's peak RSS: %d MiB", kb>>10)
		if kb > 256<<10 {
			t.Errorf("the daemon peaked at %d MiB reading these manifests, want under 256 MiB", kb>>10)
		}
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

type problem struct {
	Origin string `json:"origin"`
	Error  string `json:"error"`
}

func getProblems(t *testing.T, d *testdaemon.Daemon) []problem {
	t.Helper()
	var out []problem
	if err := json.Unmarshal([]byte(mustGet(t, d.SocketClient(), "http://staticpodd/problems")), &out); err != nil {
		t.Fatalf("decode /problems: %v", err)
	}
	return out
}

func problemFor(problems []problem, origin string) (string, bool) {
	for _, p := range problems {
		if p.Origin == origin {
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

// peakRSSKiB is the high-water mark of pid's resident memory.
func peakRSSKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// TestHostileManifestLimits holds the daemon's parser to bounded memory for a
// manifest within the size limit. YAML anchors let a small file stand for a
// large document: the yaml library refuses a billion laughs by the ratio of
// aliases to nodes, but not a few aliases of one large string.
func TestHostileManifestLimits(t *testing.T) {
	t.Parallel()
	testroot.Require(t)
	t.Run("alias-amplification", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "amplified.yaml")
		var b strings.Builder
		b.WriteString(sleeper("amplified"))
		fmt.Fprintf(&b, "  zz0: &big %q\n", strings.Repeat("x", 1<<20))
		fmt.Fprintf(&b, "  zz1: [%s*big]\n", strings.Repeat("*big, ", 63))
		fmt.Fprintf(&b, "  zz2: [%s1]\n", strings.Repeat("1, ", 127))
		write(t, p, b.String(), 0o644)
		out, code, rss := validateUsage(t, p)
		t.Logf("validate: exit %d, peak RSS %d MiB for a %d KiB file:\n%s", code, rss>>10, b.Len()>>10, out)
		if rss > 256<<10 {
			t.Errorf("parsing a %d KiB manifest took %d MiB", b.Len()>>10, rss>>10)
		}
		if code != 0 && !strings.Contains(out, p) {
			t.Errorf("the refusal does not name the file:\n%s", out)
		}
	})
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
