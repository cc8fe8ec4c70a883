package daemon

import "golang.org/x/sys/unix"

// notDumpable makes the daemon not dumpable, before it reads a Secret: no
// core dump of it, and no ptrace or /proc/<pid>/{mem,environ,fd} of it but
// by a process with CAP_SYS_PTRACE. Not inherited past an exec: its
// monitors and the processes it execs in containers are dumpable as ever.
func notDumpable() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
