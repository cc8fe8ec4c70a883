package podspec

import "syscall"

// signals are Linux's, by the API's names.
var signals = map[string]syscall.Signal{
	"SIGABRT": syscall.SIGABRT, "SIGALRM": syscall.SIGALRM, "SIGBUS": syscall.SIGBUS,
	"SIGCHLD": syscall.SIGCHLD, "SIGCLD": syscall.SIGCLD, "SIGCONT": syscall.SIGCONT,
	"SIGFPE": syscall.SIGFPE, "SIGHUP": syscall.SIGHUP, "SIGILL": syscall.SIGILL,
	"SIGINT": syscall.SIGINT, "SIGIO": syscall.SIGIO, "SIGIOT": syscall.SIGIOT,
	"SIGKILL": syscall.SIGKILL, "SIGPIPE": syscall.SIGPIPE, "SIGPOLL": syscall.SIGPOLL,
	"SIGPROF": syscall.SIGPROF, "SIGPWR": syscall.SIGPWR, "SIGQUIT": syscall.SIGQUIT,
	"SIGSEGV": syscall.SIGSEGV, "SIGSTOP": syscall.SIGSTOP,
	"SIGSYS": syscall.SIGSYS, "SIGTERM": syscall.SIGTERM, "SIGTRAP": syscall.SIGTRAP,
	"SIGTSTP": syscall.SIGTSTP, "SIGTTIN": syscall.SIGTTIN, "SIGTTOU": syscall.SIGTTOU,
	"SIGURG": syscall.SIGURG, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2,
	"SIGVTALRM": syscall.SIGVTALRM, "SIGWINCH": syscall.SIGWINCH, "SIGXCPU": syscall.SIGXCPU,
	"SIGXFSZ": syscall.SIGXFSZ,
}

// signalNames name each signal once, aliases left out.
var signalNames = map[syscall.Signal]string{}

func init() {
	addStkflt(signals)
	for name, sig := range signals {
		switch name {
		case "SIGCLD", "SIGIOT", "SIGPOLL":
			continue
		}
		signalNames[sig] = name
	}
}
