//go:build !linux

package image

import "errors"

// Usage needs the Linux walk of usage_linux.go; the store runs on Linux only,
// and the CLI built for other systems never asks it.
func (s *Store) Usage() (bytes, inodes uint64, err error) {
	return 0, 0, errors.ErrUnsupported
}
