package status

// Evicted is the kubelet's reason of a pod its eviction manager stopped
// (pkg/kubelet/eviction Reason): the pod's status.reason, and its event's.
const Evicted = "Evicted"

// DeadlineExceeded is the kubelet's reason of a pod past its
// activeDeadlineSeconds (pkg/kubelet/active_deadline.go).
const DeadlineExceeded = "DeadlineExceeded"

// NoPodNetwork is the PodReadyToStartContainers condition's reason when the
// pod's sandbox has its loopback only (staticpodd's own).
const NoPodNetwork = "NoPodNetwork"

// Waiting reasons of a container, as the kubelet reports them
// (pkg/kubelet/container/sync_result.go, pkg/kubelet/images/types.go).
const (
	ContainerCreating          = "ContainerCreating"
	PodInitializing            = "PodInitializing"
	CrashLoopBackOff           = "CrashLoopBackOff"
	CreateContainerConfigError = "CreateContainerConfigError"
	CreateContainerError       = "CreateContainerError"
	RunContainerError          = "RunContainerError"
	ErrImageNeverPull          = "ErrImageNeverPull"
	ErrImagePull               = "ErrImagePull"
	ImagePullBackOff           = "ImagePullBackOff"
	InvalidImageName           = "InvalidImageName"
	// SignatureValidationFailed is the CRI's error for an image its
	// runtime's signature policy refuses (k8s.io/cri-api/pkg/errors), which
	// the kubelet's image manager gives as the reason (evalCRIPullErr): a
	// pull's error, or the runtime's, whose text starts with it.
	SignatureValidationFailed = "SignatureValidationFailed"
)

// WaitingForDependency is staticpodd's own waiting reason of a container
// whose pod starts after other static pods (manifest.AnnotationStartAfter)
// that are not Ready yet, or never can be (a cycle, a name no manifest
// defines): nothing of the pod is made meanwhile.
const WaitingForDependency = "WaitingForDependency"

// turn reports whether a container waiting for reason only waits for its
// turn: it is being created, or waits for the init containers.
func turn(reason string) bool { return reason == ContainerCreating || reason == PodInitializing }

// mendless reports whether a container waiting for reason waits for what no
// retry mends without a change run --once does not wait for: a new
// manifest, an image imported by hand.
func mendless(reason string) bool {
	return reason == CreateContainerConfigError || reason == ErrImageNeverPull
}

// hopeless reports whether a container waiting for reason will not get going
// by waiting longer: it failed, or backs off after failing.
func hopeless(reason string) bool {
	switch reason {
	case CrashLoopBackOff, ErrImageNeverPull, CreateContainerError, CreateContainerConfigError,
		RunContainerError, InvalidImageName, ErrImagePull, ImagePullBackOff, SignatureValidationFailed:
		return true
	}
	return false
}
