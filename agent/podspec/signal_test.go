package podspec

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want syscall.Signal // 0: an error
	}{
		{"SIGUSR1", syscall.SIGUSR1},
		{"usr1", syscall.SIGUSR1},
		{"SigQuit", syscall.SIGQUIT},
		{"15", syscall.SIGTERM},
		{"SIGRTMIN", 34},
		{"RTMIN+3", 37},
		{"SIGRTMAX-1", 63},
		{"SIGRTMAX", 64},
		{"SIGIOT", syscall.SIGABRT},
		{"0", 0},
		{"65", 0},
		{"-1", 0},
		{"SIGNOPE", 0},
		{"SIGRTMIN-1", 0},
		{"SIGRTMAX+1", 0},
		{"SIGRTMIN+31", 0},
		{"", 0},
	} {
		got, err := ParseSignal(tc.in)
		if got != tc.want || (err != nil) != (tc.want == 0) {
			t.Errorf("ParseSignal(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// Every name the API accepts is known, and names itself back (aliases aside).
func TestStopSignalNames(t *testing.T) {
	if len(StopSignalNames) != 65 {
		t.Errorf("%d names, want the API server's 65", len(StopSignalNames))
	}
	aliases := map[string]string{"SIGCLD": "SIGCHLD", "SIGIOT": "SIGABRT", "SIGPOLL": "SIGIO"}
	for _, n := range StopSignalNames {
		sig, err := ParseSignal(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		want := n
		if a, ok := aliases[n]; ok {
			want = a
		}
		if got := SignalName(sig); got != want {
			t.Errorf("SignalName(%d) = %q, want %q", sig, got, want)
		}
	}
}

// TestParseSignalErrorBounded: an image decides its StopSignal, which the
// daemon warns about when it cannot read it; the error shows its start.
func TestParseSignalErrorBounded(t *testing.T) {
	for _, s := range []string{"SIG" + strings.Repeat("X", 1<<20), "9" + strings.Repeat("9", 1<<20)} {
		_, err := ParseSignal(s)
		if err == nil || len(err.Error()) > 100 || !strings.Contains(err.Error(), `"SIGXXX`) && !strings.Contains(err.Error(), `"999`) {
			t.Errorf("ParseSignal of %d bytes: error of %d bytes, want under 100 showing its start", len(s), len(fmt.Sprint(err)))
		}
	}
}
