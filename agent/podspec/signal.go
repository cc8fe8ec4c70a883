package podspec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// StopSignalNames are the signals the API server accepts as a Linux
// container's lifecycle.stopSignal (validation's supportedStopSignalsLinux),
// sorted.
var StopSignalNames = func() []string {
	names := []string{
		"SIGABRT", "SIGALRM", "SIGBUS", "SIGCHLD", "SIGCLD", "SIGCONT", "SIGFPE", "SIGHUP",
		"SIGILL", "SIGINT", "SIGIO", "SIGIOT", "SIGKILL", "SIGPIPE", "SIGPOLL", "SIGPROF",
		"SIGPWR", "SIGQUIT", "SIGSEGV", "SIGSTKFLT", "SIGSTOP", "SIGSYS", "SIGTERM", "SIGTRAP",
		"SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGUSR1", "SIGUSR2", "SIGVTALRM", "SIGWINCH",
		"SIGXCPU", "SIGXFSZ", "SIGRTMIN", "SIGRTMAX",
	}
	for i := 1; i <= 15; i++ {
		names = append(names, "SIGRTMIN+"+strconv.Itoa(i))
	}
	for i := 1; i <= 14; i++ {
		names = append(names, "SIGRTMAX-"+strconv.Itoa(i))
	}
	slices.Sort(names)
	return names
}()

// Real-time signals as Docker, containerd and the C libraries number them:
// glibc keeps the kernel's first two for itself.
const (
	sigRTMin = 34
	sigRTMax = 64
)

// ParseSignal reads a signal the way Docker and containerd read an image's
// StopSignal: a number, or a name with or without "SIG" in any case
// ("SIGUSR1", "usr1", "RTMIN+3"). Zero and unknown names are errors.
func ParseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > sigRTMax {
			return 0, invalidSignal(s)
		}
		return syscall.Signal(n), nil
	}
	name := "SIG" + strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if sig, ok := signalNumber(name); ok {
		return sig, nil
	}
	return 0, invalidSignal(s)
}

// invalidSignal is the error for s, which an image may make as long as
// its config: it shows 32 bytes of it.
func invalidSignal(s string) error {
	if len(s) > 32 {
		return fmt.Errorf("invalid signal %q... (%d bytes)", Truncate(s, 32), len(s))
	}
	return fmt.Errorf("invalid signal %q", s)
}

// signalNumber is the number of a signal named as the API names it
// ("SIGUSR1", "SIGRTMIN+3").
func signalNumber(name string) (syscall.Signal, bool) {
	if rest, ok := strings.CutPrefix(name, "SIGRTMIN"); ok {
		return rtSignal(rest, sigRTMin, 1)
	}
	if rest, ok := strings.CutPrefix(name, "SIGRTMAX"); ok {
		return rtSignal(rest, sigRTMax, -1)
	}
	sig, ok := signals[name]
	return sig, ok
}

// rtSignal is base, or base plus ("+n") or minus ("-n") n within the range of
// real-time signals; dir says which sign is allowed.
func rtSignal(rest string, base, dir int) (syscall.Signal, bool) {
	if rest == "" {
		return syscall.Signal(base), true
	}
	sign := "+"
	if dir < 0 {
		sign = "-"
	}
	n, err := strconv.Atoi(strings.TrimPrefix(rest, sign))
	if !strings.HasPrefix(rest, sign) || err != nil || n < 1 || n > sigRTMax-sigRTMin {
		return 0, false
	}
	return syscall.Signal(base + dir*n), true
}

// SignalName is the API's name of sig ("SIGUSR1", "SIGRTMIN+3"); "" when it
// has none here. Aliases get their common name (SIGABRT, not SIGIOT).
func SignalName(sig syscall.Signal) string {
	switch n := int(sig); {
	case n == sigRTMin:
		return "SIGRTMIN"
	case n > sigRTMin && n <= sigRTMin+15:
		return "SIGRTMIN+" + strconv.Itoa(n-sigRTMin)
	case n > sigRTMin+15 && n < sigRTMax:
		return "SIGRTMAX-" + strconv.Itoa(sigRTMax-n)
	case n == sigRTMax:
		return "SIGRTMAX"
	}
	return signalNames[sig]
}
