//go:build linux && cgo

package oci

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"unsafe"

	"github.com/opencontainers/runc/libcontainer/exeseal"

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
	f = adoptedMonitorMemfd(runDir, prog)
	if f == nil {
		if f, err = newMonitorMemfd(prog); err != nil {
			return selfExe, nil, err
		}
	}
	path = "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd()))
	if err := probeMonitor(path); err != nil {
		_ = f.Close()
		return selfExe, nil, err
	}
	return path, f, nil
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

// maxAdoptedChecked bounds how many monitors' executables a start compares
// with the embedded program: monitors of one daemon share one memfd, so a
// few distinct ones at most are worth reading.
const maxAdoptedChecked = 4

// adoptedMonitorMemfd returns the executable of a monitor recorded under
// runDir, opened, if it is a sealed memfd holding prog byte for byte; nil
// if there is none. Whatever process the recorded pid is now, the
// seals and the bytes make what it returns safe to run.
func adoptedMonitorMemfd(runDir, prog string) *os.File {
	dir := filepath.Join(runDir, containersDir)
	entries, _ := os.ReadDir(dir)
	checked := 0
	for _, e := range entries {
		var st monitorState
		if readJSON(filepath.Join(dir, e.Name(), stateFile), &st) != nil || st.MonitorPid <= 0 {
			continue
		}
		f, err := os.Open("/proc/" + strconv.Itoa(st.MonitorPid) + "/exe")
		if err != nil {
			continue
		}
		if exeseal.IsCloned(f) {
			checked++
			if sameContent(f, prog) {
				return f
			}
		}
		_ = f.Close()
		if checked == maxAdoptedChecked {
			break
		}
	}
	return nil
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

// probeMonitor runs the monitor's program at path without a role: it must
// say that it runs for staticpodd only (oci/monitor/exe).
func probeMonitor(path string) error {
	cmd := exec.Command(path)
	cmd.Args[0] = mon.Name
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !bytes.Contains(out, []byte("run by staticpodd only")) {
		return fmt.Errorf("run the monitor's program %s: %v %q", path, err, out)
	}
	return nil
}
