//go:build linux && cgo

package main

// The quick exec (execfast.c) is `staticpodd exec POD [-c NAME] [-n NS] --
// COMMAND...` without -i or -t, served by a C constructor before the Go
// runtime starts: it sends exec.go's request, says the daemon's refusal or
// copies the frames of its 101, and exits with the command's status, saying
// what exec.go says. The Go runtime's start and this binary's package
// initializers cost several times what the exec itself costs the CLI
// (docs/benchmarks.md). Left to Go, before anything has run: another shape
// of arguments (and the hidden --test-exec-in-go, which tests use to compare
// the two), a closed stdin, stdout or stderr, a run dir that is not absolute
// and clean, no daemon listening (the records answer), a failure to connect
// or send, an answer of which nothing came, and a refusal it does not read
// (an older daemon's 404, a chunked body): Go asks again. A status line that says 101 is the quick exec's to
// the end: the daemon may have started the command. Signals behave as in a
// Go program (docs/architecture.md, "exec").

// #cgo CFLAGS: -O2 -Wall -Wextra -Wno-unused-parameter
// extern const char *staticpodd_quick_exec_names[7];
// extern const int staticpodd_quick_exec_max_frame;
import "C"

import "unsafe"

// quickExecNames are the names and figures the quick exec has from the Go
// side, in its order: the run dir's variable, the default run dir, the
// socket's name, the kubelet personality's name, the exec protocol, the note
// header, the answer's timeout; and the largest frame.
func quickExecNames() ([]string, int) {
	names := unsafe.Slice(&C.staticpodd_quick_exec_names[0], 7)
	var s []string
	for _, n := range names {
		s = append(s, C.GoString(n))
	}
	return s, int(C.staticpodd_quick_exec_max_frame)
}

// haveQuickExec says the quick exec is linked in.
const haveQuickExec = true
