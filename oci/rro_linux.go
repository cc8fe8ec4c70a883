package oci

import (
	"errors"

	"golang.org/x/sys/unix"
)

// SupportsRecursiveReadOnly reports whether the kernel has mount_setattr(2)
// (Linux 5.12), with which a read-only bind is made read-only recursively,
// its submounts included (recursiveReadOnly IfPossible). Called on a bad
// file descriptor, it fails with EBADF where it exists, ENOSYS where not.
func SupportsRecursiveReadOnly() bool {
	err := unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{})
	return !errors.Is(err, unix.ENOSYS)
}
