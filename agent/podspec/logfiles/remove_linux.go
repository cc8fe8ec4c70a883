package logfiles

import (
	"os"
	"syscall"
)

// removeIn removes the file name of the directory d by name, never through
// d's path.
func removeIn(d *os.File, name string) error {
	return syscall.Unlinkat(int(d.Fd()), name)
}
