//go:build !linux

package host

import "errors"

func kernelRelease() (string, error) {
	return "", errors.ErrUnsupported
}
