//go:build linux && cgo

package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
	"unsafe"

	"github.com/opencontainers/runc/libcontainer/exeseal"
	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"

	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// selfExe is this binary, which has every monitor role too (Reexec).
const selfExe = "/proc/self/exe"

// openMonitorExecutable returns what monitors are started from, and the
// file that must stay open for as long as they are: prog, the program the
// build embeds (monitorBinary, built from oci/monitor/exe), in a sealed
// memfd; or this binary itself, in a build without it (f is nil, err too),
// or when the memfd cannot be made or run (err says why).
//
// The embedded program links libcontainer and the monitor and nothing of the
// daemon: a monitor's start, the container's init that libcontainer
// re-executes from it, and the exit recorder each start in a fraction of
// the daemon's start-up time. Sealed (no write, grow, shrink or new seal),
// the memfd is what libcontainer takes for its CVE-2019-5736 protection
// (exeseal.IsSelfExeCloned), so the init runs it as it is, with no copy or
// overlay per start. Each monitor keeps its memfd (its executable) until it
// exits, through daemon restarts and upgrades; so that restarts do not each
// pin another copy, a daemon takes the memfd of a monitor it finds under
// runDir when it holds the very same program.
//
// A child execs it through this process's descriptor, /proc/<pid>/fd/<n>:
// its own copy of the descriptor may be gone by then, as os/exec moves
// descriptors around to set up the child's. The path is tried once here, so
// that a kernel or security module that refuses to execute it makes the
// daemon fall back to itself instead of failing every start.
func openMonitorExecutable(runDir, prog string) (path string, f *os.File, err error) {
	if len(prog) == 0 {
		return selfExe, nil, nil
	}
	// Read once, whether copied or compared: its pages need not stay in
	// this process's RSS.
	defer mon.DropExePages(unsafe.Pointer(unsafe.StringData(prog)), len(prog))
	if f = adoptedMonitorMemfd(runDir, prog); f != nil {
		path = fdPath(f)
		if probeMonitor(path) == nil {
			return path, f, nil
		}
		_ = f.Close() // a copy of our own, then
	}
	if f, err = newMonitorMemfd(prog); err != nil {
		return selfExe, nil, err
	}
	path = fdPath(f)
	if err := probeMonitor(path); err != nil {
		_ = f.Close()
		return selfExe, nil, err
	}
	return path, f, nil
}

// fdPath is the path through which children execute this process's f.
func fdPath(f *os.File) string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd()))
}

// newMonitorMemfd writes prog into a new memfd and seals it.
func newMonitorMemfd(prog string) (*os.File, error) {
	f, seal, err := exeseal.Memfd(mon.Name)
	if err != nil {
		return nil, fmt.Errorf("monitor memfd: %w", err)
	}
	if _, err := io.WriteString(f, prog); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write monitor memfd: %w", err)
	}
	if err := seal(&f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("seal monitor memfd: %w", err)
	}
	if !exeseal.IsCloned(f) {
		_ = f.Close()
		return nil, errors.New("monitor memfd: not sealed")
	}
	return f, nil
}

// maxAdoptedChecked bounds how many executables of running monitors a
// start compares with the embedded program: monitors of one daemon share
// one memfd, so a few distinct ones at most are worth reading.
const maxAdoptedChecked = 4

// adoptedMonitorMemfd returns the executable of a monitor recorded under
// runDir, opened, if that monitor still runs (its pid and start time) and
// its executable is a memfd of this user's, read-only and sealed, holding
// prog byte for byte; nil if there is none.
func adoptedMonitorMemfd(runDir, prog string) *os.File {
	dir := filepath.Join(runDir, containersDir)
	entries, _ := os.ReadDir(dir)
	compared := map[uint64]bool{} // by inode
	for _, e := range entries {
		if len(compared) == maxAdoptedChecked {
			break
		}
		var st monitorState
		if readJSON(filepath.Join(dir, e.Name(), stateFile), &st) != nil || st.MonitorPid <= 0 {
			continue
		}
		f, ino := openMonitorExe(st, int64(len(prog)))
		if f == nil || compared[ino] {
			if f != nil {
				_ = f.Close()
			}
			continue
		}
		compared[ino] = true
		if sameContent(f, prog) {
			return f
		}
		_ = f.Close()
	}
	return nil
}

// openMonitorExe opens the executable of the monitor st records if that
// monitor still runs and the file is a candidate for adoptedMonitorMemfd:
// sealed as libcontainer seals a memfd, of size, owned by this user and
// writable by nobody (a process of another user that got the recorded pid,
// or one that could still chmod its file, is never taken).
func openMonitorExe(st monitorState, size int64) (*os.File, uint64) {
	pidfd, err := openPidfd(st.MonitorPid)
	if err != nil {
		return nil, 0
	}
	defer pidfd.Close()
	same := func() bool {
		stat, err := system.Stat(st.MonitorPid)
		return err == nil && stat.StartTime == st.MonitorStart && !pidfdExited(pidfd)
	}
	if !same() {
		return nil, 0
	}
	f, err := os.Open("/proc/" + strconv.Itoa(st.MonitorPid) + "/exe")
	if err != nil {
		return nil, 0
	}
	// Still the same process, so the file opened was its executable.
	var fst unix.Stat_t
	if !same() || unix.Fstat(int(f.Fd()), &fst) != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG ||
		fst.Size != size || int(fst.Uid) != os.Geteuid() || fst.Mode&0o222 != 0 || !exeseal.IsCloned(f) {
		_ = f.Close()
		return nil, 0
	}
	return f, fst.Ino
}

// sameContent tells whether f holds exactly prog.
func sameContent(f *os.File, prog string) bool {
	if st, err := f.Stat(); err != nil || st.Size() != int64(len(prog)) {
		return false
	}
	buf := make([]byte, 64<<10)
	for off := 0; off < len(prog); {
		n, err := f.ReadAt(buf, int64(off))
		if n == 0 || string(buf[:n]) != prog[off:off+n] {
			return false
		}
		off += n
		if err != nil && off < len(prog) {
			return false
		}
	}
	return true
}

// probeTimeout bounds probeMonitor.
const probeTimeout = 10 * time.Second

// probeMonitor runs the monitor's program at path without a role, as a
// monitor would be started: it must say that it runs for staticpodd only
// (oci/monitor/exe).
func probeMonitor(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Args[0] = mon.Name
	cmd.Dir = "/"
	cmd.Env = monitorEnv(os.Environ())
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !bytes.Contains(out, []byte("run by staticpodd only")) {
		return fmt.Errorf("run the monitor's program %s: %v %q", path, err, out)
	}
	return nil
}
