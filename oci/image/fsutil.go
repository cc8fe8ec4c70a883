package image

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// writeFileAtomic replaces path with data: a temp file in the same directory,
// fsync, rename.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// stagingPrefix starts the name of every staging dir this process makes, so a later
// Open can tell which staging dirs belong to processes that are gone.
func stagingPrefix() string { return strconv.Itoa(os.Getpid()) + "-" }

func stagingPID(name string) int {
	s, _, _ := strings.Cut(name, "-")
	pid, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return pid
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
