//go:build linux && cgo

package oci

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"github.com/opencontainers/runc/libcontainer/exeseal"

	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// monitorMemfd holds the embedded monitor program; see monitorExecutable.
var monitorMemfd *os.File

// monitorExecutable is what a monitor is started from: the program the
// build embeds (monitorBinary, built from oci/monitor/exe) in a sealed
// memfd, made once per process, or this binary itself (/proc/self/exe),
// which runs the same roles (Reexec), in a build without it or where no
// executable memfd can be made (vm.memfd_noexec=2). err says why it is the
// latter although the build embeds one.
//
// The embedded program links libcontainer and the monitor and nothing of the
// daemon: a monitor's start, the container's init that libcontainer
// re-executes from it, and the exit recorder each start in a fraction of
// the daemon's start-up time. Sealed (no write, grow or shrink), the memfd is
// what libcontainer takes for its CVE-2019-5736 protection
// (exeseal.IsSelfExeCloned), so the init runs it as it is, with no copy or
// overlay per start. It costs its size in shared memory once per daemon,
// and each monitor keeps its own daemon's copy (its executable) until it
// exits, through a daemon restart or upgrade.
var monitorExecutable = sync.OnceValues(func() (string, error) {
	const self = "/proc/self/exe"
	if len(monitorBinary) == 0 {
		return self, nil
	}
	f, seal, err := exeseal.Memfd(mon.Name)
	if err != nil {
		return self, fmt.Errorf("monitor memfd: %w", err)
	}
	_, err = io.WriteString(f, monitorBinary)
	// Read once: its pages need not stay in this process's RSS.
	mon.DropExePages(unsafe.Pointer(unsafe.StringData(monitorBinary)), len(monitorBinary))
	if err != nil {
		_ = f.Close()
		return self, fmt.Errorf("write monitor memfd: %w", err)
	}
	if err := seal(&f); err != nil {
		_ = f.Close()
		return self, fmt.Errorf("seal monitor memfd: %w", err)
	}
	if !exeseal.IsCloned(f) {
		_ = f.Close()
		return self, errors.New("monitor memfd: not sealed")
	}
	// Open for the life of the process (held here, or the garbage collector
	// would close it). A child execs it through this process's descriptor:
	// its own copy may be gone by then, as os/exec moves descriptors around
	// to set up the child's.
	monitorMemfd = f
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd())), nil
})
