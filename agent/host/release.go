package host

// KernelRelease is uname -r, the node's kernel release (nodeInfo's
// kernelVersion; the sysctls the kernel namespaces). Off Linux it returns
// errors.ErrUnsupported.
func KernelRelease() (string, error) {
	return kernelRelease()
}
