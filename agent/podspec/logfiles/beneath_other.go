//go:build !linux

package logfiles

import (
	"errors"
	"os"
	"path/filepath"
)

// Elsewhere than on Linux the pod log directory is opened by path: a
// symlink put in it is followed.
const (
	ContainerDirDepth = 2
	FileDepth         = 3
)

// OpenLog opens a log file to read.
func OpenLog(path string) (*os.File, error) { return os.Open(path) }

// OpenContainerDir opens a container's log directory.
func OpenContainerDir(dir string) (*os.File, error) { return os.Open(dir) }

// ReadContainerDir returns the names in a container's log directory.
func ReadContainerDir(dir string) ([]string, error) { return readDirNames(filepath.Clean(dir)) }

// MakeContainerDir creates a container's log directory and opens it.
func MakeContainerDir(dir string, mode uint32) (*os.File, error) {
	if err := os.MkdirAll(dir, os.FileMode(mode)); err != nil {
		return nil, err
	}
	return os.Open(dir)
}

// RotatedLogsAt is not supported elsewhere than on Linux.
func RotatedLogsAt(dirfd int, base string) (inUse []RotatedLog, unused []string, err error) {
	return nil, nil, errors.ErrUnsupported
}

// OpenRegularAt is not supported elsewhere than on Linux.
func OpenRegularAt(dirfd int, name string, flags int, mode uint32) (int, error) {
	return -1, errors.ErrUnsupported
}
