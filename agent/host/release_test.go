package host

import (
	"errors"
	"runtime"
	"testing"
)

func TestKernelRelease(t *testing.T) {
	r, err := KernelRelease()
	if runtime.GOOS != "linux" {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("off Linux: %q, %v; want ErrUnsupported", r, err)
		}
		return
	}
	if err != nil || r == "" || r[0] < '0' || r[0] > '9' {
		t.Errorf("KernelRelease() = %q, %v; want a release such as 6.1.0", r, err)
	}
}
