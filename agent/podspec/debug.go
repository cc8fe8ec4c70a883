package podspec

import "errors"

// Errors of a debug request that callers branch on.
var (
	// ErrDebugInvalid: the request itself is wrong (its image reference,
	// command or target), whatever the pod's state.
	ErrDebugInvalid = errors.New("invalid debug request")
	// ErrDebugLimit: as many debug containers run as the pod or the node
	// allows; another may start once one has ended.
	ErrDebugLimit = errors.New("too many debug containers")
)

// DebugRequest is an ephemeral container to run in a pod, as `kubectl debug`
// adds one: Image's rootfs, the pod's namespaces, and Target's PID namespace
// if not empty (a container's name in the pod); its process is Cmd, with
// standard input if Stdin, on a terminal if TTY.
type DebugRequest struct {
	Image  string
	Target string
	Cmd    []string
	Stdin  bool
	TTY    bool
}
