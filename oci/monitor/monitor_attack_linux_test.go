//go:build linux && cgo

package monitor

// What an attacker's review of the C monitor tried: each test here failed
// before its fix, or checks a case it found to hold.

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// trickyContent is output that tests the line handling: lines of 0 to 100000
// bytes around the 16 KiB and 64 KiB edges, NUL bytes, invalid UTF-8, and a
// last line without its end.
func trickyContent(seed int64) []byte {
	r := rand.New(rand.NewSource(seed))
	var b bytes.Buffer
	sizes := []int{0, 1, 16383, 16384, 16385, 32768, 49151, 65535, 65536, 65537, 100000, 0, 0}
	for i := 0; i < 60; i++ {
		n := sizes[r.Intn(len(sizes))]
		if r.Intn(3) == 0 {
			n = r.Intn(70000)
		}
		for j := 0; j < n; j++ {
			c := byte(r.Intn(256))
			if c == '\n' {
				c = 0
			}
			b.WriteByte(c)
		}
		b.WriteByte('\n')
	}
	b.WriteString("tail without newline \x00\xff")
	return b.Bytes()
}

// Whatever the container writes, and however it cuts its writes, the log
// gives it back byte for byte, with no entry over 16 KiB.
func TestRunningMonitorContentFidelity(t *testing.T) {
	for _, tc := range []struct {
		name, writer string
		maxSize      int64
	}{
		{"cat", `cat "$IN"`, 0},
		{"dd-1000", `dd if="$IN" bs=1000 2>/dev/null`, 0},
		{"dd-16384", `dd if="$IN" bs=16384 2>/dev/null`, 0},
		{"rotating", `dd if="$IN" bs=7000 2>/dev/null`, 200000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := trickyContent(int64(len(tc.name)))
			in := filepath.Join(t.TempDir(), "in")
			if err := os.WriteFile(in, want, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Setenv("IN", in)
			m := startRunningMonitor(t, tc.writer, tc.maxSize, 1000)
			m.exit()
			var all string
			rotated, _ := rotatedFiles(t, m.log)
			for _, r := range rotated {
				all += readMaybeGzip(t, r)
			}
			live, _ := os.ReadFile(m.log)
			all += string(live)
			got := criContent(t, all)["stdout"]
			if got != string(want) {
				i := 0
				for i < len(got) && i < len(want) && got[i] == want[i] {
					i++
				}
				t.Errorf("content differs at byte %d of %d (got %d bytes)", i, len(want), len(got))
			}
			for _, l := range strings.Split(all, "\n") {
				if strings.Contains(l, " stdout F ") || strings.Contains(l, " stdout P ") {
					continue
				}
				if l != "" {
					t.Fatalf("bad line prefix %q", l[:min(len(l), 60)])
				}
			}
		})
	}
}

// A log path whose rotated names would pass PATH_MAX: rotation works in the
// directory by name (*at calls), so it goes on as for any log, and names are
// never cut (cut, they collided and the helper compressed a file onto
// itself).
func TestRunningMonitorLongLogPath(t *testing.T) {
	base := t.TempDir()
	dir := base
	for len(dir) < 4096-len("/0.log")-12 {
		dir = filepath.Join(dir, strings.Repeat("d", min(200, 4096-len("/0.log")-12-len(dir)-1)))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "0.log")
	t.Logf("log path of %d bytes", len(logPath))
	m := startRunningMonitorLog(t, `i=0; while [ $i -lt 300 ]; do echo "line $i of the container's output"; i=$((i+1)); done`, logPath, 2048, 5)
	m.exit()
	ents, _ := os.ReadDir(dir)
	var total int
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		t.Logf("%s: %d bytes", e.Name(), len(b))
		total += strings.Count(string(b), "\n")
	}
	live, _ := os.ReadFile(logPath)
	got := criContent(t, string(live))["stdout"]
	t.Logf("%d lines in all files; monitor log:\n%s", total, m.monitorLog())
	if !strings.Contains(got, "line 299 ") || len(live) > 2048 {
		t.Errorf("the live log (%d bytes) does not end the output or was not rotated", len(live))
	}
	checkRotatedNames(t, ents, 5)
	if strings.Contains(m.monitorLog(), "cannot") {
		t.Errorf("rotation or compression failed on a long path:\n%s", m.monitorLog())
	}
}

// checkRotatedNames checks that the log directory holds 0.log and at most
// maxFiles-1 files rotation made of it, each named in full.
func checkRotatedNames(t *testing.T, ents []os.DirEntry, maxFiles int) {
	t.Helper()
	stamp := regexp.MustCompile(`^0\.log(\.[0-9]{8}-[0-9]{6}(\.gz)?)?$`)
	n := 0
	for _, e := range ents {
		switch {
		case e.Name() == LogFile || e.Name() == RotationFile:
		case !stamp.MatchString(e.Name()):
			t.Errorf("%s in the log directory: not a name rotation makes", e.Name())
		case e.Name() != "0.log":
			n++
		}
	}
	if n == 0 || n > maxFiles-1 {
		t.Errorf("%d rotated files, want 1 to %d", n, maxFiles-1)
	}
}

func TestCRILogLongLogPath(t *testing.T) {
	base := t.TempDir()
	dir := base
	for len(dir) < 4096-len("/0.log")-12 {
		dir = filepath.Join(dir, strings.Repeat("d", min(200, 4096-len("/0.log")-12-len(dir)-1)))
	}
	_ = os.MkdirAll(dir, 0o755)
	logPath := filepath.Join(dir, "0.log")
	l, err := openCRILog(logPath, LogRotation{MaxSize: 2048, MaxFiles: 5}, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r, w, _ := os.Pipe()
	go func() {
		for i := 0; i < 300; i++ {
			w.WriteString("line of the container's output\n")
		}
		w.Close()
	}()
	_ = l.copy("stdout", r)
	l.Close()
	live, _ := os.ReadFile(logPath)
	if len(live) == 0 || len(live) > 2048 {
		t.Errorf("Go writer: live log of %d bytes, want it rotated at 2048", len(live))
	}
	ents, _ := os.ReadDir(dir)
	checkRotatedNames(t, ents, 5)
}

// A rotated file that disappears (removed by hand, by a log cleaner) is
// dropped from the list, as the Go writer skips it; it stopped the C
// monitor's compression for good before.
func TestRunningMonitorGoneRotatedFile(t *testing.T) {
	const maxSize, maxFiles, lines = 4096, 10, 400
	dir := t.TempDir()
	logPath := dir + "/0.log"
	if err := os.WriteFile(logPath+".20000101-000000", []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	m := startRunningMonitorLog(t, `read x < "$GO"; i=0; while [ $i -lt `+strconv.Itoa(lines)+` ]; do echo "line $i of the container's output"; i=$((i+1)); done; read x < "$GO"`, logPath, maxSize, maxFiles)
	m.running()
	time.Sleep(100 * time.Millisecond) // the first gzip pass (one file: the newest, none to do)
	os.Remove(logPath + ".20000101-000000")
	m.release()
	// Wait for the thing, not for a time: the output all written (its last
	// line is in the live file: a rotation comes before an entry that does
	// not fit), then the gzip helper's passes done with every rotated file
	// but the newest, for as long as a loaded machine takes.
	last := fmt.Sprintf("line %d of the container's output", lines-1)
	var rotated, plain []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(logPath)
		rotated, plain = rotatedFiles(t, logPath)
		if strings.Contains(string(b), last) && len(plain) <= 1 {
			break
		}
	}
	t.Logf("%d rotated, %d not compressed; monitor log:\n%s", len(rotated), len(plain), m.monitorLog())
	if len(plain) > 1 {
		t.Errorf("%d rotated files left uncompressed, want 1 (the newest)", len(plain))
	}
	m.release()
	m.exit()
}

// A file in the log dir that is not a rotation of ours (an operator's
// "cp 0.log 0.log.bak") is passed over when the next rotated file is named:
// before, every later name was "<newest>-1", growing until the C monitor's
// 63-byte cap made rotations overwrite each other and lose lines (and the Go
// writer's until renames failed and the live file grew past maxSize).
func TestRunningMonitorForeignRotatedName(t *testing.T) {
	const maxSize, maxFiles, lines = 1024, 5, 600
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	if err := os.WriteFile(logPath+".bak", []byte("an operator's copy\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	m := startRunningMonitorLog(t, `i=0; while [ $i -lt `+strconv.Itoa(lines)+` ]; do echo "line $i of the container's output"; i=$((i+1)); done`, logPath, maxSize, maxFiles)
	m.exit()
	checkForeignRotation(t, logPath, maxSize, maxFiles, lines)
}

func TestCRILogForeignRotatedName(t *testing.T) {
	const maxSize, maxFiles, lines = 1024, 5, 600
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	if err := os.WriteFile(logPath+".bak", []byte("an operator's copy\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	l, err := openCRILog(logPath, LogRotation{MaxSize: maxSize, MaxFiles: maxFiles}, slogDiscard())
	if err != nil {
		t.Fatal(err)
	}
	r, w, _ := os.Pipe()
	go func() {
		for i := range lines {
			fmt.Fprintf(w, "line %d of the container's output\n", i)
		}
		w.Close()
	}()
	_ = l.copy("stdout", r)
	l.Close()
	checkForeignRotation(t, logPath, maxSize, maxFiles, lines)
}

// checkForeignRotation checks a log rotated (past a foreign <log>.bak, if any): every
// rotated name is a stamp, maxFiles-1 of them are kept, the live file is
// within maxSize, and the files hold the newest lines without a gap.
func checkForeignRotation(t *testing.T, logPath string, maxSize int64, maxFiles, lines int) {
	t.Helper()
	matches, _ := filepath.Glob(logPath + ".*")
	slices.Sort(matches)
	stamp := regexp.MustCompile(`^\d{8}-\d{6}(\.gz)?$`)
	var all string
	for _, f := range matches {
		if !stamp.MatchString(strings.TrimPrefix(f, logPath+".")) {
			t.Errorf("rotated file %s is not named by a stamp", filepath.Base(f))
		}
		all += readMaybeGzip(t, f)
	}
	if len(matches) != maxFiles-1 {
		t.Errorf("%d rotated files, want %d: %v", len(matches), maxFiles-1, matches)
	}
	live, _ := os.ReadFile(logPath)
	if int64(len(live)) > maxSize {
		t.Errorf("live log of %d bytes, over maxSize %d", len(live), maxSize)
	}
	got := strings.Split(strings.TrimSuffix(criContent(t, all+string(live))["stdout"], "\n"), "\n")
	first := lines - len(got)
	for i, line := range got {
		if want := fmt.Sprintf("line %d of the container's output", first+i); line != want {
			t.Fatalf("kept line %d = %q, want %q (the newest lines, in order, without a gap)", i, line, want)
		}
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// 2000 SIGHUPs while the container writes and leaves 200 orphans: the exit
// is still its own.
func TestRunningMonitorSighupAndChildStorm(t *testing.T) {
	m := startRunningMonitor(t, `read x < "$GO"; i=0; while [ $i -lt 200 ]; do (echo orphan $i) & i=$((i+1)); done; i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done; exit 9`, 0, 0)
	m.running()
	if err := WriteRotation(filepath.Join(m.dir, RotationFile), LogRotation{MaxSize: 4096, MaxFiles: 3}); err != nil {
		t.Fatal(err)
	}
	m.release()
	for i := 0; i < 2000 && m.role() == "__staticpodd_monitor_running"; i++ {
		_ = unix.Kill(m.cmd.Process.Pid, unix.SIGHUP)
	}
	exit := m.exit()
	if exit.ExitCode != 9 {
		t.Errorf("exit %+v, want 9", exit)
	}
	live, _ := os.ReadFile(m.log)
	t.Logf("monitor log lines: %d; live log %d bytes; tail %q", strings.Count(m.monitorLog(), "\n"), len(live), live[max(0, len(live)-60):])
}

// A container that closes its stdout early goes on being copied on stderr.
func TestRunningMonitorStdoutClosedEarly(t *testing.T) {
	m := startRunningMonitor(t, `echo out; exec >&-; sleep 0.3; echo err >&2; exit 4`, 0, 0)
	if e := m.exit(); e.ExitCode != 4 {
		t.Errorf("exit %+v", e)
	}
	b, _ := os.ReadFile(m.log)
	got := criContent(t, string(b))
	if got["stdout"] != "out\n" || got["stderr"] != "err\n" {
		t.Errorf("got %q", got)
	}
}

// A maxSize smaller than one entry, with maxFiles 2: each entry gets a file,
// and one rotated file is kept.
func TestRunningMonitorTinyMaxSize(t *testing.T) {
	m := startRunningMonitor(t, `i=0; while [ $i -lt 50 ]; do echo "line $i of the container's output"; i=$((i+1)); done`, 10, 2)
	m.exit()
	all, _ := rotatedFiles(t, m.log)
	live, _ := os.ReadFile(m.log)
	t.Logf("rotated %v live %q", all, live)
	if len(all) != 1 {
		t.Errorf("%d rotated", len(all))
	}
}

// A rotation file that is not of its fixed form changes nothing (garbage
// once read as "rotation off", and the log grew without bound): neither one
// of another size nor one of the right size with a maxFiles no daemon
// writes. Each refusal is logged, and the output written after it is rotated
// at the container's maxSize and maxFiles, the newest lines kept without a
// gap.
func TestRunningMonitorGarbageRotationFile(t *testing.T) {
	const maxSize, maxFiles, lines = 4096, 3, 600
	m := startRunningMonitor(t, `read x < "$GO"; i=0; while [ $i -lt `+strconv.Itoa(lines)+` ]; do echo "line $i of the container's output"; i=$((i+1)); done`, maxSize, maxFiles)
	m.running()
	if err := os.WriteFile(filepath.Join(m.dir, RotationFile), []byte("not json at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rot, _, err := ReadRotation(filepath.Join(m.dir, RotationFile)); err == nil {
		t.Errorf("Go's reading of the garbage rotation file = %+v, want an error", rot)
	}
	if err := m.cmd.Process.Signal(unix.SIGHUP); err != nil {
		t.Fatal(err)
	}
	m.eventually("the refusal logged", func() bool {
		return strings.Contains(m.monitorLog(), `msg="log rotation not changed"`)
	})
	if err := os.WriteFile(filepath.Join(m.dir, RotationFile), []byte("0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rot, _, err := ReadRotation(filepath.Join(m.dir, RotationFile)); err == nil {
		t.Errorf("Go's reading of the %d-byte garbage rotation file = %+v, want an error", RotationSize, rot)
	}
	if err := m.cmd.Process.Signal(unix.SIGHUP); err != nil {
		t.Fatal(err)
	}
	m.eventually("the second refusal logged", func() bool {
		return strings.Count(m.monitorLog(), `msg="log rotation not changed"`) == 2
	})
	if strings.Contains(m.monitorLog(), `msg="log rotation changed"`) {
		t.Errorf("the garbage rotation file was taken:\n%s", m.monitorLog())
	}
	m.release()
	if e := m.exit(); e.ExitCode != 0 {
		t.Errorf("exit %+v, want 0", e)
	}
	checkForeignRotation(t, m.log, maxSize, maxFiles, lines)
}

// kill -9 of the C monitor while its gzip helper runs takes the helper too
// (its parent-death signal).
func TestRunningMonitorKilledTakesGzipHelper(t *testing.T) {
	m := startRunningMonitor(t, `yes "some line of the container's output, rotated and compressed" | head -c 400000000; read x < "$GO"`, 8<<20, 10)
	m.running()
	var helper int
	m.eventually("a gzip helper", func() bool {
		for _, k := range childrenOf(t, m.cmd.Process.Pid) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k))
			if a := strings.Split(string(b), "\x00"); len(a) > 1 && a[1] == GzipArg {
				helper = k
				return true
			}
		}
		return false
	})
	_ = m.cmd.Process.Kill()
	time.Sleep(50 * time.Millisecond)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", helper))
	alive := err == nil && !strings.Contains(string(b), "State:\tZ")
	time.Sleep(2 * time.Second)
	tmps, _ := filepath.Glob(m.log + ".*.tmp")
	ents, _ := os.ReadDir(filepath.Dir(m.log))
	for _, e := range ents {
		t.Logf("  %s", e.Name())
	}
	t.Logf("helper %d alive after the monitor's kill -9: %v; .tmp left: %v", helper, alive, tmps)
	// The .tmp stays (as a killed Go monitor's did): the next open of the
	// log removes it, which TestCRILogTidiesWhatACrashLeft covers.
	if alive {
		t.Errorf("the killed monitor's gzip helper %d outlived it", helper)
	}
}

func (m *runningMonitor) role() string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", m.cmd.Process.Pid))
	args := strings.Split(string(b), "\x00")
	if len(args) > 1 {
		return args[1]
	}
	return ""
}

// A SIGHUP (the daemon's reload of log rotation) that reaches the monitor
// while it records the exit must not lose the exit.
func TestRunningMonitorSighupDuringExitRecorder(t *testing.T) {
	// The background sleep holds the pipes, so the exit recorder (which
	// finds no libcontainer container here) waits for their EOF for 2s.
	m := startRunningMonitor(t, `sleep 2 & echo bye; exit 5`, 0, 0)
	m.eventually("the exit recorder running", func() bool { return m.role() == ExitArg })
	time.Sleep(100 * time.Millisecond) // past the Go runtime's start
	_ = m.cmd.Process.Signal(unix.SIGHUP)
	select {
	case err := <-m.done:
		m.done <- err
		t.Logf("monitor ended: %v", err)
	case <-time.After(10 * time.Second):
	}
	if _, err := os.Stat(m.dir + "/" + ExitFile); err != nil {
		t.Errorf("no exit recorded after a SIGHUP to the exit recorder: %v\nmonitor log:\n%s", err, m.monitorLog())
	}
}

// A log file replaced by a symlink (a container with the host's log
// directory mounted could plant one) is never written through: not by the
// Go writer, not by the C monitor, and the gzip helper does not create its
// .tmp through one.
func TestLogFilesNotWrittenThroughSymlinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	if err := os.WriteFile(outside, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "0.log")
	if err := os.Symlink(outside, logPath); err != nil {
		t.Fatal(err)
	}
	if l, err := openCRILog(logPath, LogRotation{}, slogDiscard()); err == nil {
		l.Close()
		t.Error("the Go writer opened a log that is a symlink")
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	logDir, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer logDir.Close()
	cmd := exec.Command(exe, RunningArg, "test", logPath, "4", "0", "0", "", "1", "3", "3", GzipArg, "staticpodd-monitor", ExitArg)
	cmd.ExtraFiles = []*os.File{r, logDir}
	out, err := cmd.CombinedOutput()
	w.Close()
	if err == nil || !strings.Contains(string(out), "open log") {
		t.Errorf("the C monitor on a symlinked log: %v, %q; want it to refuse to open it", err, out)
	}

	src := filepath.Join(dir, "0.log.20261201-000000")
	if err := os.WriteFile(src, []byte("a rotated file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, src+".tmp"); err != nil {
		t.Fatal(err)
	}
	// The helper removes the symlink and makes its .tmp itself.
	if out, err := gzipHelper(exe, logDir, src, src+".tmp").CombinedOutput(); err != nil {
		t.Errorf("the gzip helper: %v, %q", err, out)
	}
	if fi, err := os.Lstat(src + ".tmp"); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the gzip helper's .tmp: %v, %v; want a regular file", fi, err)
	}
	if b, _ := os.ReadFile(outside); len(b) != 0 {
		t.Errorf("a file outside the log was written through a symlink: %q", b)
	}

	// A rotated file that is a symlink to a host file is not compressed
	// into the log directory.
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(dir, "0.log.20261201-000001")
	if err := os.Symlink(secret, planted); err != nil {
		t.Fatal(err)
	}
	if out, err := gzipHelper(exe, logDir, planted, planted+".tmp").CombinedOutput(); err == nil {
		t.Errorf("the gzip helper read through a symlinked rotated file: %q", out)
	}
	if _, err := os.Stat(planted + ".tmp"); err == nil {
		t.Error("the gzip helper copied a host file behind a symlink into the log directory")
	}
}

// gzipHelper is the C monitor's gzip helper on src and tmp, names in dir.
func gzipHelper(exe string, dir *os.File, src, tmp string) *exec.Cmd {
	cmd := exec.Command(exe, GzipArg, "3", filepath.Base(src), filepath.Base(tmp), "10485760")
	cmd.ExtraFiles = []*os.File{dir}
	return cmd
}
