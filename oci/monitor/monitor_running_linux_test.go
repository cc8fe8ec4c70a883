//go:build linux && cgo

package monitor

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// runningMonitor is the C monitor run by a test, without a container: a
// shell starts the workload with its output on two pipes, then execs this
// test binary as the C monitor with the workload as its "init", so that the
// monitor is its parent, as for a real container. The C monitor ends in the
// real exit recorder (runExit), which finds no libcontainer container here,
// says so in the monitor log and still copies the rest and writes exit.json.
type runningMonitor struct {
	t                *testing.T
	cmd              *exec.Cmd
	dir, log, monLog string
	// goW is the write end of the pipe the workload may wait on ($GO, a
	// /dev/fd path): release writes it a line. A pipe that the test holds
	// open, not a FIFO: a FIFO's writer that had not yet closed when the
	// workload opened it for its next wait gave that wait an end of file,
	// and the workload ran on and ended early.
	goW  *os.File
	done chan error
}

func startRunningMonitor(t *testing.T, workload string, maxSize int64, maxFiles int) *runningMonitor {
	t.Helper()
	return startRunningMonitorLog(t, workload, "", maxSize, maxFiles)
}

// startRunningMonitorLog is startRunningMonitor with the log at logPath
// ("": in the test's directory).
func startRunningMonitorLog(t *testing.T, workload, logPath string, maxSize int64, maxFiles int) *runningMonitor {
	t.Helper()
	dir := t.TempDir()
	if logPath == "" {
		logPath = filepath.Join(dir, "0.log")
	}
	m := &runningMonitor{t: t, dir: dir, log: logPath, monLog: filepath.Join(dir, LogFile),
		done: make(chan error, 1)}
	pipe := func() (r, w *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		return r, w
	}
	startR, startW := pipe()
	goR, goW := pipe()
	m.goW = goW
	t.Cleanup(func() { startW.Close(); goW.Close() })
	outR, outW := pipe()
	errR, errW := pipe()
	monLog, err := os.Create(m.monLog)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// fds: 3 stdout read end, 4 stderr read end, 5 and 6 the write ends,
	// which only the workload keeps, as it does 7, the start pipe, and 8,
	// the pipe of $GO; 9 the log's directory, which only the monitor keeps
	// (and its gzip helper and exit recorder).
	// The workload starts once the C monitor runs: one that ended before
	// the shell's exec would be reaped by the shell, not by the monitor.
	logDir, err := os.Open(filepath.Dir(m.log))
	if err != nil {
		t.Fatal(err)
	}
	script := `(read x <&7; ` + workload + `) >&5 2>&6 5>&- 6>&- 3<&- 4<&- 9<&- &
pid=$!
exec 5>&- 6>&- 7<&- 8<&-
exec "$0" "$@" "$pid" 3 4 ` + GzipArg + ` staticpodd-monitor ` + ExitArg + ` "$ROOT" "$DIR" test "$LOG" 9 3 4 0 false`
	m.cmd = exec.Command("/bin/sh", "-c", script, exe, RunningArg, "test", m.log, "9",
		strconv.FormatInt(maxSize, 10), strconv.Itoa(maxFiles), filepath.Join(dir, RotationFile))
	m.cmd.Env = append(os.Environ(), "ROOT="+filepath.Join(dir, "libcontainer"), "DIR="+dir, "LOG="+m.log, "GO=/dev/fd/8")
	m.cmd.ExtraFiles = []*os.File{outR, errR, outW, errW, startR, goR, logDir}
	// A group of its own, so that the cleanup also ends a workload whose
	// monitor a test killed.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	m.cmd.Stdout, m.cmd.Stderr = monLog, monLog
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*os.File{outR, errR, outW, errW, startR, goR, logDir, monLog} {
		f.Close()
	}
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(func() {
		_ = unix.Kill(-m.cmd.Process.Pid, unix.SIGKILL)
		<-m.done
	})
	m.running()
	if _, err := startW.WriteString("\n"); err != nil {
		t.Fatal(err)
	}
	return m
}

// running waits until the process is the C monitor with SIGHUP blocked.
// The real monitor's exec arrives with it blocked already; the shell's here
// does not, and a SIGHUP sent between the exec and the C monitor's
// sigprocmask would kill it.
func (m *runningMonitor) running() {
	m.t.Helper()
	m.eventually("the C monitor running", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", m.cmd.Process.Pid))
		args := strings.Split(string(b), "\x00")
		return len(args) > 1 && args[1] == RunningArg && sigBlocked(m.cmd.Process.Pid, unix.SIGHUP)
	})
}

// sigBlocked says whether pid's main thread blocks sig.
func sigBlocked(pid int, sig unix.Signal) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigBlk:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			return err == nil && v&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// release lets a workload waiting on $GO go on.
func (m *runningMonitor) release() {
	m.t.Helper()
	// A pipe's buffer holds the line: this never waits for the reader.
	if _, err := m.goW.WriteString("\n"); err != nil {
		m.t.Fatal(err)
	}
}

// exit waits for the monitor to end and returns the exit it recorded.
func (m *runningMonitor) exit() ExitRecord {
	m.t.Helper()
	select {
	case <-m.done:
		m.done <- nil // for Cleanup
	case <-time.After(30 * time.Second):
		m.t.Fatalf("the monitor did not end; its log:\n%s", m.monitorLog())
	}
	var exit ExitRecord
	if err := ReadJSON(filepath.Join(m.dir, ExitFile), &exit); err != nil {
		m.t.Fatalf("no exit recorded: %v; monitor log:\n%s", err, m.monitorLog())
	}
	return exit
}

func (m *runningMonitor) monitorLog() string {
	b, _ := os.ReadFile(m.monLog)
	return string(b)
}

func (m *runningMonitor) eventually(what string, ok func() bool) {
	m.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			m.t.Fatalf("timed out waiting for %s; monitor log:\n%s", what, m.monitorLog())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var criEntry = regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d*[1-9])?Z) (stdout|stderr) ([FP]) (.*)$`)

// criContent parses CRI log text into each stream's content, lines joined
// back from their partial entries, failing on an entry of the wrong form.
func criContent(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "\n") {
			t.Fatalf("entry without its newline: %q", line)
		}
		g := criEntry.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if g == nil {
			t.Fatalf("not a CRI log entry: %q", line)
		}
		if _, err := time.Parse(time.RFC3339Nano, g[1]); err != nil {
			t.Fatalf("entry time %q: %v", g[1], err)
		}
		if len(g[4]) > MaxLogLine {
			t.Fatalf("entry of %d bytes, more than %d", len(g[4]), MaxLogLine)
		}
		out[g[2]] += g[4]
		if g[3] == "F" {
			out[g[2]] += "\n"
		}
	}
	return out
}

// The C monitor writes both streams in the CRI format, long lines split into
// partial entries, an unterminated last line as a partial entry, and the
// exit as the Go monitor recorded it.
func TestRunningMonitorCopiesAndRecordsExit(t *testing.T) {
	long := strings.Repeat("x", 3*MaxLogLine+5)
	m := startRunningMonitor(t, `echo one; echo two >&2; printf '%s\n' "`+long+`"; printf '\n'; printf 'no end'; exit 3`, 0, 0)
	exit := m.exit()
	if exit.ExitCode != 3 || exit.Signal != 0 || exit.FinishedAt.IsZero() || time.Since(exit.FinishedAt) > time.Minute {
		t.Errorf("exit = %+v, want code 3 finished just now", exit)
	}
	b, err := os.ReadFile(m.log)
	if err != nil {
		t.Fatal(err)
	}
	got := criContent(t, string(b))
	want := map[string]string{"stdout": "one\n" + long + "\n\nno end", "stderr": "two\n"}
	if got["stdout"] != want["stdout"] || got["stderr"] != want["stderr"] {
		t.Errorf("log content = %q, want %q", got, want)
	}
	if n := strings.Count(string(b), " stdout P "); n != 4 { // 3 parts of the long line, "no end"
		t.Errorf("%d partial stdout entries, want 4:\n%s", n, b)
	}
}

// A container killed by a signal is recorded as the Go monitor did: 128+n.
func TestRunningMonitorRecordsSignal(t *testing.T) {
	m := startRunningMonitor(t, `exec sh -c 'echo up; kill -KILL $$'`, 0, 0)
	exit := m.exit()
	if exit.ExitCode != 137 || exit.Signal != int(syscall.SIGKILL) {
		t.Errorf("exit = %+v, want 137 by SIGKILL", exit)
	}
}

// The C monitor rotates the log by maxSize, keeps maxFiles files, compresses
// every rotated file but the newest, and loses or reorders no line.
func TestRunningMonitorRotates(t *testing.T) {
	const maxSize, maxFiles, lines = 4096, 4, 400
	m := startRunningMonitor(t, `i=0; while [ $i -lt `+strconv.Itoa(lines)+` ]; do echo "line $i of the container's output"; i=$((i+1)); done; read x < "$GO"`, maxSize, maxFiles)
	m.running()
	// Once the writer is done, the compression of all but the newest catches up.
	m.eventually("all but the newest rotated file compressed", func() bool {
		rotated, plain := rotatedFiles(t, m.log)
		return len(rotated) == maxFiles-1 && len(plain) == 1 && plain[0] == rotated[len(rotated)-1]
	})
	m.release()
	m.exit()
	rotated, _ := rotatedFiles(t, m.log)
	var all string
	for _, r := range rotated {
		all += readMaybeGzip(t, r)
	}
	live, err := os.ReadFile(m.log)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(m.log); fi.Size() > maxSize {
		t.Errorf("live log of %d bytes, over maxSize %d", fi.Size(), maxSize)
	}
	got := strings.Split(strings.TrimSuffix(criContent(t, all+string(live))["stdout"], "\n"), "\n")
	// The kept files hold the newest lines, all of them, in order.
	first, err := strconv.Atoi(strings.Fields(got[0])[1])
	if err != nil {
		t.Fatalf("first kept line %q", got[0])
	}
	for i, line := range got {
		if want := fmt.Sprintf("line %d of the container's output", first+i); line != want {
			t.Fatalf("kept line %d = %q, want %q", i, line, want)
		}
	}
	if first+len(got) != lines || first == 0 {
		t.Errorf("kept lines %d to %d, want the newest up to %d, some rotated out", first, first+len(got)-1, lines-1)
	}
	if leftovers, _ := filepath.Glob(m.log + ".*.tmp"); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// rotatedFiles lists path's rotated files oldest first, and those of them
// not compressed.
func rotatedFiles(t *testing.T, path string) (all, plain []string) {
	matches, err := filepath.Glob(path + ".2*")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(matches)
	for _, m := range matches {
		if strings.HasSuffix(m, ".tmp") {
			continue
		}
		all = append(all, m)
		if !strings.HasSuffix(m, ".gz") {
			plain = append(plain, m)
		}
	}
	return all, plain
}

func readMaybeGzip(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, ".gz") {
		return string(b)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(out)
}

// A SIGHUP makes the C monitor read the rotation file again, as the daemon's
// reload expects; a file it cannot read changes nothing and is logged.
func TestRunningMonitorReloadsRotation(t *testing.T) {
	m := startRunningMonitor(t, `echo before; read x < "$GO"; i=0; while [ $i -lt 100 ]; do echo "after $i"; i=$((i+1)); done; read x < "$GO"`, 0, 0)
	m.running()
	rotFile := filepath.Join(m.dir, RotationFile)
	if err := os.WriteFile(rotFile, []byte(`{"maxSize":"big"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = m.cmd.Process.Signal(unix.SIGHUP)
	m.eventually("the bad rotation file reported", func() bool {
		return strings.Contains(m.monitorLog(), `msg="log rotation not changed"`)
	})
	if err := WriteRotation(rotFile, LogRotation{MaxSize: 1024, MaxFiles: 2}); err != nil {
		t.Fatal(err)
	}
	_ = m.cmd.Process.Signal(unix.SIGHUP)
	m.eventually("the new rotation applied", func() bool {
		return strings.Contains(m.monitorLog(), `msg="log rotation changed" container=test maxSize=1024 maxFiles=2`)
	})
	m.release()
	m.eventually("the log rotated", func() bool {
		all, _ := rotatedFiles(t, m.log)
		return len(all) == 1
	})
	m.release()
	if exit := m.exit(); exit.ExitCode != 0 {
		t.Errorf("exit = %+v, want 0", exit)
	}
	if fi, err := os.Stat(m.log); err != nil || fi.Size() > 1024 {
		t.Errorf("live log after the reload: %v, %v; want at most 1024 bytes", fi, err)
	}
}

// A log that cannot be written loses output but never blocks the container,
// and says so once in the monitor's log.
func TestRunningMonitorKeepsDrainingWhenWritesFail(t *testing.T) {
	m := startRunningMonitorLog(t, `i=0; while [ $i -lt 2000 ]; do echo "some output that goes nowhere, line $i"; i=$((i+1)); done; exit 7`, fullLogPath(t), 0, 0)
	if exit := m.exit(); exit.ExitCode != 7 {
		t.Errorf("exit = %+v, want 7", exit)
	}
	if n := strings.Count(m.monitorLog(), "cannot write container log"); n != 1 {
		t.Errorf("write failure logged %d times, want once:\n%s", n, m.monitorLog())
	}
}

// fullLogPath is a log path on a filesystem with no space left, where every
// write fails with ENOSPC (the monitor opens only regular files: /dev/full
// would not do).
func fullLogPath(t *testing.T) string {
	t.Helper()
	testroot.Require(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		if _, err := f.Write(make([]byte, 4096)); errors.Is(err, unix.ENOSPC) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "0.log")
}

// The C monitor reaps the orphans a container leaves to it (it is a child
// subreaper, as the Go monitor was), and costs little memory at rest: the
// bound is the memory-regression check of docs/benchmarks.md ("Memory").
func TestRunningMonitorReapsOrphansAndStaysSmall(t *testing.T) {
	// The inner shell exits at once: its sleep is an orphan, reparented
	// to the monitor.
	m := startRunningMonitor(t, `sh -c 'sleep 0.05 &'; echo ready; read x < "$GO"`, 0, 0)
	m.running()
	m.eventually("the workload ready", func() bool {
		b, _ := os.ReadFile(m.log)
		return strings.Contains(string(b), " stdout F ready\n")
	})
	pid := m.cmd.Process.Pid
	// Once the orphan exits, nothing is left under the monitor but the
	// workload's shell: no zombie.
	m.eventually("no zombie under the monitor", func() bool {
		kids := childrenOf(t, pid)
		if len(kids) != 1 {
			return false
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", kids[0]))
		return err == nil && !strings.Contains(string(st), ") Z ")
	})
	anon := statusKB(t, pid, "RssAnon:")
	if anon > runningMonitorAnonBound>>10 {
		t.Errorf("the C monitor has %d KiB of anonymous memory, more than %d KiB", anon, runningMonitorAnonBound>>10)
	}
	t.Logf("C monitor at rest: %d KiB anonymous, %d KiB resident", anon, statusKB(t, pid, "VmRSS:"))
	m.release()
	m.exit()
}

// runningMonitorAnonBound is a generous bound on the C monitor's anonymous
// memory: about 100 KiB are measured (its buffers, glibc's, the stack).
const runningMonitorAnonBound = 1 << 20

func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		kids = append(kids, n)
	}
	return kids
}

func statusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s of %d: %q", field, pid, v)
			}
			return n
		}
	}
	t.Fatalf("no %s for %d", field, pid)
	return 0
}

// What a container's leftovers write after its init exited is copied by the
// exit recorder with the C monitor's writer (drainLog): rotated at maxSize,
// the older rotated files compressed by the gzip helper (which the recorder
// waits for by pid, reaping no orphan meanwhile), no line lost or reordered,
// no temporary file left.
func TestExitRecorderDrainsWithRotation(t *testing.T) {
	const maxSize, maxFiles, lines = 4096, 4, 500
	// Init exits at once; its orphan writes on, after the C monitor's
	// bounded drain, until the recorder reads the pipes' end: in bursts,
	// each more than maxSize, with time between them to compress. The
	// drain stops the gzip helper when the pipes end, as criLog.Close
	// does, so the orphan holds them until the recorder has written its
	// last line to the live file (the pipes hold all it wrote, so a loaded
	// recorder may rotate long after the orphan is done) and the helper has
	// compressed all but the newest rotated file (30s at most), rather than
	// for a time a loaded machine may not compress in.
	m := startRunningMonitor(t, `(i=0; while [ $i -lt `+strconv.Itoa(lines)+` ]; do [ $((i%100)) = 0 ] && sleep 0.3; echo "line $i of the leftover's output"; i=$((i+1)); done; `+
		`n=0; while { ! grep -q "line `+strconv.Itoa(lines-1)+` of" "$LOG" 2>/dev/null || [ "$(ls "$LOG".*.gz 2>/dev/null | wc -l)" -lt `+strconv.Itoa(maxFiles-2)+` ] || ls "$LOG".*.tmp >/dev/null 2>&1; } && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done) & exit 5`, maxSize, maxFiles)
	if exit := m.exit(); exit.ExitCode != 5 {
		t.Errorf("exit = %+v, want 5", exit)
	}
	rotated, _ := rotatedFiles(t, m.log)
	if len(rotated) == 0 {
		t.Fatalf("no rotated file; monitor log:\n%s", m.monitorLog())
	}
	var all string
	for _, r := range rotated {
		all += readMaybeGzip(t, r)
	}
	live, err := os.ReadFile(m.log)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(criContent(t, all+string(live))["stdout"], "\n"), "\n")
	first, err := strconv.Atoi(strings.Fields(got[0])[1])
	if err != nil {
		t.Fatalf("first kept line %q", got[0])
	}
	for i, line := range got {
		if want := fmt.Sprintf("line %d of the leftover's output", first+i); line != want {
			t.Fatalf("kept line %d = %q, want %q", i, line, want)
		}
	}
	if first+len(got) != lines || first == 0 {
		t.Errorf("kept lines %d to %d, want the newest up to %d, some rotated out", first, first+len(got)-1, lines-1)
	}
	// Where the drain rotates: a rotated file holds at most maxSize bytes,
	// and was rotated because the next entry did not fit (an entry here,
	// timestamp, stream, tag and line, is under 100 bytes).
	const longest = 100
	for _, r := range rotated {
		if n := len(readMaybeGzip(t, r)); n > maxSize || n <= maxSize-longest {
			t.Errorf("rotated file %s holds %d bytes, want more than %d and at most %d", r, n, maxSize-longest, maxSize)
		}
	}
	if leftovers, _ := filepath.Glob(m.log + ".*.tmp"); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	if _, plain := rotatedFiles(t, m.log); strings.Contains(m.monitorLog(), "cannot compress") ||
		len(rotated) != maxFiles-1 || len(plain) != 1 || plain[0] != rotated[len(rotated)-1] {
		t.Errorf("rotated files %v, want %d, all but the newest compressed; monitor log:\n%s", rotated, maxFiles-1, m.monitorLog())
	}
}

// The C writer, the one that writes a container's log, writes what the Go
// oracle (criLog) writes of the same output: the same entries of each stream,
// split and tagged alike (long lines, empty ones, an unterminated last one),
// across rotated and compressed files; as the C monitor, and through cgo in
// the exit recorder (drainLog), for what a container's leftovers write after
// its init exited.
func TestCWriterMatchesOracle(t *testing.T) {
	for _, tc := range []struct{ name, wrap string }{
		{"running", "%s"},
		{"after init", "(sleep 0.3; %s) & exit 0"},
	} {
		t.Run(tc.name, func(t *testing.T) { testCWriterMatchesOracle(t, tc.wrap) })
	}
}

func testCWriterMatchesOracle(t *testing.T, wrap string) {
	const maxSize, maxFiles = 2048, 1000 // every file kept
	long := strings.Repeat("y", 2*MaxLogLine+7)
	workload := `i=0; while [ $i -lt 300 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; printf '%s\n\n\n' "` +
		long + `"; echo tail >&2; printf 'no end'`
	m := startRunningMonitor(t, fmt.Sprintf(wrap, workload), maxSize, maxFiles)
	m.exit()

	oracle := filepath.Join(t.TempDir(), "0.log")
	l, err := openCRILog(oracle, LogRotation{MaxSize: maxSize, MaxFiles: maxFiles}, slogDiscard())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", workload)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	copied := make(chan error, 1)
	go func() { copied <- l.copy("stderr", errs) }()
	if err := errors.Join(l.copy("stdout", out), <-copied, cmd.Wait(), l.Close()); err != nil {
		t.Fatal(err)
	}

	c, g := logEntries(t, m.log), logEntries(t, oracle)
	for _, stream := range []string{"stdout", "stderr"} {
		if !slices.Equal(c[stream], g[stream]) {
			t.Errorf("%s: the C writer wrote %d entries, the oracle %d; they differ", stream, len(c[stream]), len(g[stream]))
		}
	}
	if len(c["stdout"]) != 300+3+3 || len(c["stderr"]) != 300+1 {
		t.Errorf("%d stdout and %d stderr entries, want 306 and 301", len(c["stdout"]), len(c["stderr"]))
	}
}

// logEntries reads a log's files, rotated ones first, and returns each
// stream's entries as "<tag> <content>", in order.
func logEntries(t *testing.T, path string) map[string][]string {
	t.Helper()
	rotated, _ := rotatedFiles(t, path)
	if len(rotated) == 0 {
		t.Fatalf("%s never rotated", path)
	}
	var text string
	for _, r := range rotated {
		text += readMaybeGzip(t, r)
	}
	live, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text += string(live)
	entries := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		g := criEntry.FindStringSubmatch(line)
		if g == nil {
			t.Fatalf("not a CRI log entry: %q", line)
		}
		entries[g[2]] = append(entries[g[2]], g[3]+" "+g[4])
	}
	return entries
}
