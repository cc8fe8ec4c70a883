//go:build !linux

package volumes

import (
	"errors"
	"fmt"
)

func mountTmpfs(dir string, size int64) error {
	return fmt.Errorf("mount tmpfs on %s: %w", dir, errors.ErrUnsupported)
}

func unmountIfMounted(string) error { return nil }

// mountPointsUnder finds none: nothing is mounted off Linux.
func mountPointsUnder(string) ([]string, error) { return nil, nil }
