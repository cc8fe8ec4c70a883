//go:build linux && cgo

package monitor

import (
	"os"
	"os/signal"
	"unsafe"

	// Registers the device-rules cgroup manager; without it libcontainer refuses
	// to start containers ("cgroup manager is not configured to set device rules").
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer"
	// nsenter's C constructor runs before the Go runtime in "init" re-execs.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/oci/cgroupv1mounts"
)

// Reexec runs the process roles a monitor's binary is executed in:
// libcontainer's container init ("init"), the monitor's Go roles (its
// start, its exit, its gzip helper; the running one is C and never gets
// here) and the exec server. A main must call it first thing; it returns false for any other
// command line and never returns otherwise.
func Reexec() bool {
	if len(os.Args) < 2 {
		return false
	}
	switch os.Args[1] {
	case "init":
		if os.Getenv("_LIBCONTAINER_INITPIPE") == "" {
			return false
		}
		libcontainer.Init() // does not return
	case StartArg:
		nameProcess()
		survivePipes()
		seedCgroupMounts()
		os.Exit(runMonitor(os.Args[2:]))
	case ExitArg:
		nameProcess()
		survivePipes()
		os.Exit(runExit(os.Args[2:]))
	case GzipArg:
		nameProcess()
		survivePipes()
		os.Exit(runGzip(os.Args[2:]))
	case ExecArg:
		nameProcess()
		survivePipes()
		os.Exit(runExec(os.Args[2:]))
	}
	return false
}

// survivePipes makes a write to a closed pipe or socket on stdout or stderr
// (the daemon's, whose reader went away: journald restarted, a terminal
// closed) fail with EPIPE rather than kill the process with SIGPIPE, as Go
// does by default for those two descriptors: a role that dies of it would
// leave its processes unreaped and its records unwritten. A handler, not
// SIG_IGN: the processes it starts (a container's exec) get SIGPIPE's
// default back at their exec.
func survivePipes() {
	signal.Notify(make(chan os.Signal, 1), unix.SIGPIPE)
}

// nameProcess gives the process Name (cut to the kernel's 15 bytes) in ps,
// top, pidof and the journal's _COMM: run from a memfd, it would be named by
// the descriptor's number, and after the C monitor's exec of /proc/self/exe
// "exe". It runs on the main thread (see the program's init), whose name is
// the process's; the init keeps the name nsexec gives it, which
// oci.waitExec watches for.
func nameProcess() {
	name, err := unix.BytePtrFromString(Name)
	if err == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
	}
}

// seedCgroupMounts takes the cgroup v1 mounts the daemon read
// (cgroupv1mounts.Env), so that creating the container does not read the
// host's mount table again, and keeps them from what the monitor starts.
func seedCgroupMounts() {
	if mounts, ok := os.LookupEnv(cgroupv1mounts.Env); ok {
		_ = os.Unsetenv(cgroupv1mounts.Env)
		cgroupv1mounts.Seed(mounts)
	}
}
