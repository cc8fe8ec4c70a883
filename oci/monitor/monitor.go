//go:build linux && cgo

// Package monitor is the half of a container's monitor that runs while its
// container does, written in C so that it costs a few hundred KiB instead of
// a Go runtime's several MiB (docs/architecture.md, "The monitor").
//
// The Go monitor (runMonitor) creates and starts the container through
// libcontainer; once the container runs, it execs this same binary with
// RunningArg as argv[1]. A C constructor (monitor.c) sees that before the Go
// runtime starts, as libcontainer's nsexec does for "init", and never
// returns: the process keeps its pid, its start time (adoption by pidfd and
// start time does not notice the exec), its children and its subreaper role,
// copies the container's output into the CRI log and rotates it, and when
// the container's init has exited execs the binary once more, into the Go
// monitor's exit recorder. Its log writer is the only one of a container's
// log: where no C monitor runs (a start that failed, the exit recorder), the
// Go monitor calls it through cgo (drainLog). Importing this package links
// the constructor in.
package monitor

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
import "C"

// RunningArg is argv[1] of the C monitor. Its command line is
//
//	<name> RunningArg <id> <log> <log-dir-fd> <maxSize> <maxFiles> <rotation-file> <init-pid> <stdout-fd> <stderr-fd> <gzip-arg> <finish-argv...>
//
// with the container's stdout and stderr pipes open on those fds, the
// directory of <log> open on <log-dir-fd> (every file of the log is
// created, renamed and removed in it by name, never through <log>, which
// only names it in messages), and SIGCHLD and SIGHUP blocked. Once init has exited it execs /proc/self/exe with
// finish-argv followed by init's wait status, the time it was reaped (Unix
// nanoseconds), and the log's maxSize and maxFiles as they are then; the
// pipes are still open on the same fds. To compress a rotated file it runs
// /proc/self/exe <gzip-arg> <log-dir-fd> <src> <tmp> <maxSize> and, when that exits 0,
// renames tmp to <src>.gz unless rotation removed src meanwhile.
const RunningArg = "__staticpodd_monitor_running"
