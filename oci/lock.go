package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile is the run dir's lock: its holder is the one daemon that may
// adopt, start and remove the containers recorded under the run dir.
const LockFile = "staticpodd.lock"

// LockRunDir takes <runDir>/staticpodd.lock (flock) for this process and
// writes its pid there, or says which other daemon has it. Take it before
// anything reads the run dir's state: a second daemon on the same dirs would
// adopt, clean up or start the first one's containers. The lock lasts until
// the file is closed or the process exits; the file is close-on-exec, so
// monitors never hold it.
func LockRunDir(runDir string) (*os.File, error) {
	path := filepath.Join(runDir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another staticpodd (pid %s) runs on --run-dir %s", strings.TrimSpace(string(pid)), runDir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
