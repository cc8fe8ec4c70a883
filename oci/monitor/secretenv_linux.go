//go:build linux

package monitor

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// secretEnvName names the memfd in /proc/<monitor>/fd.
const secretEnvName = "staticpodd-secret-env"

// SecretEnvSeals are the seals of a secret env memfd: its content can no
// longer change.
const SecretEnvSeals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// keepSecretEnv puts b (EncodeSecretEnv's form) in a sealed memfd that the
// monitor keeps for as long as its container runs; it returns its
// descriptor. Close-on-exec until handOver, so that libcontainer's init does
// not get it; the C monitor and the exit recorder then keep it.
func keepSecretEnv(b []byte) (int, error) {
	fd, err := unix.MemfdCreate(secretEnvName, unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("secret env memfd: %w", err)
	}
	for off := 0; off < len(b); {
		n, err := unix.Write(fd, b[off:])
		if err != nil {
			_ = unix.Close(fd)
			return -1, fmt.Errorf("write secret env memfd: %w", err)
		}
		off += n
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, SecretEnvSeals); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("seal secret env memfd: %w", err)
	}
	return fd, nil
}
