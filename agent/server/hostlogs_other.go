//go:build !linux

package server

import (
	"errors"
	"os"
)

// openBeneath needs openat2(2): elsewhere /logs/ serves nothing.
func openBeneath(root, rel string) (*os.File, error) {
	return nil, errors.ErrUnsupported
}
