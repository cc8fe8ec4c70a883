//go:build !linux

package logfiles

import "os"

// readDirNames returns the names in dir. Elsewhere than on Linux a file
// renamed while the directory is read may be missed.
func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}
