package image

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

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
