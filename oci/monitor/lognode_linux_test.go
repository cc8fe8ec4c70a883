//go:build linux && cgo

package monitor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// plantFifo makes name a FIFO and holds its read end open, so that a
// writer's open does not block but succeeds: what it then writes is what
// the test reads back.
func plantFifo(t *testing.T, name string) *os.File {
	t.Helper()
	if err := unix.Mkfifo(name, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// fifoHolds says whether anything was written into the FIFO read as r.
func fifoHolds(r *os.File) bool {
	n, _ := r.Read(make([]byte, 1))
	return n > 0
}

// A container that mounts the pod log directory with CAP_MKNOD can plant a
// device node (runc lets every container mknod any device; the devices
// cgroup stops only the container's own open) or a FIFO where the monitor
// opens a log file: the host's disk, /dev/port or a watchdog must never be
// opened and written as a log. The live log, as the Go writer, the exit
// recorder and the C monitor open it, and the gzip helper's .tmp are
// refused unless they are regular files.
func TestLogFilesNotOpenedWhenNotRegular(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	// A harmless device, /dev/null's numbers, stands for the host's disk.
	if err := unix.Mknod(logPath, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if l, err := openCRILog(logPath, LogRotation{}, slogDiscard()); err == nil {
		l.Close()
		t.Error("the Go writer opened a device node as its log")
	}
	if err := os.Remove(logPath); err != nil {
		t.Fatal(err)
	}
	fifo := plantFifo(t, logPath)
	if l, err := openCRILog(logPath, LogRotation{}, slogDiscard()); err == nil {
		l.copy("stdout", strings.NewReader("a line\n"))
		l.Close()
		t.Error("the Go writer opened a FIFO as its log")
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
	w.Write([]byte("a line of the container's output\n"))
	w.Close()
	cmd := exec.Command(exe, RunningArg, "test", logPath, "4", "0", "0", "", "1", "3", "3", GzipArg, "staticpodd-monitor", ExitArg)
	cmd.ExtraFiles = []*os.File{r, logDir}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "open log") {
		t.Errorf("the C monitor on a FIFO as its log: %v, %q; want it to refuse to open it", err, out)
	}
	if fifoHolds(fifo) {
		t.Error("a log line was written into a FIFO planted as the log")
	}

	src := filepath.Join(dir, "0.log.20261201-000000")
	if err := os.WriteFile(src, []byte("a rotated file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmpFifo := plantFifo(t, src+".tmp")
	// The helper removes what is under its .tmp name and makes the file.
	if out, err := gzipHelper(exe, logDir, src, src+".tmp").CombinedOutput(); err != nil {
		t.Errorf("the gzip helper: %v, %q", err, out)
	}
	if fifoHolds(tmpFifo) {
		t.Error("the gzip helper wrote into a FIFO planted as its .tmp")
	}
	if fi, err := os.Lstat(src + ".tmp"); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the gzip helper's .tmp: %v, %v; want a regular file", fi, err)
	}
	// Nor is a device node planted as a rotated file opened to compress it.
	planted := filepath.Join(dir, "0.log.20261201-000001")
	if err := unix.Mknod(planted, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 5))); err != nil {
		t.Fatal(err)
	}
	if out, err := gzipHelper(exe, logDir, planted, planted+".tmp").CombinedOutput(); err == nil {
		t.Errorf("the gzip helper compressed a device node: %q", out)
	}
	if _, err := os.Lstat(planted + ".tmp"); err == nil {
		t.Error("the gzip helper made a .tmp of a device node")
	}
}

// A container that can write in its log directory plants a rotated file
// that is huge and sparse (a terabyte that costs it no disk and no time):
// the gzip helper, a process of the host outside the pod's cgroup, would
// spend an hour of CPU on it, again at every rotation. A rotated file
// larger than maxSize allows is not compressed, and the helper says so.
func TestRunningMonitorOversizedRotatedFile(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	planted := logPath + ".20000101-000000"
	f, err := os.Create(planted)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m := startRunningMonitorLog(t, `i=0; while [ $i -lt 300 ]; do echo "line $i of the container's output"; i=$((i+1)); done; read x < "$GO"`, logPath, 4096, 10)
	m.eventually("the helper refusing the planted file", func() bool {
		return strings.Contains(m.monitorLog(), "more than a rotated log")
	})
	m.release()
	m.exit()
	if _, err := os.Stat(planted + ".gz"); err == nil {
		t.Error("the planted file was compressed")
	}
}
