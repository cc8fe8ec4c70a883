//go:build !linux

package logfiles

import (
	"os"
	"path/filepath"
)

// removeIn removes the file name of the directory d. Elsewhere than on Linux
// it goes by path, as the directory was opened.
func removeIn(d *os.File, name string) error {
	return os.Remove(filepath.Join(d.Name(), name))
}
