// Package images makes sure a container's image is in the store before the
// container starts, as the kubelet's image manager does
// (pkg/kubelet/images.EnsureImageExists): the imagePullPolicy, the pull
// back-off per pod and image, and the last failure of each pull, for the
// message of ImagePullBackOff. The store and its puller are the caller's
// (oci/image, behind Puller).
package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/eviction"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

// Waiting reasons of a container whose image is being pulled or failed to
// be (the kubelet's images.ErrImagePull, images.ErrImagePullBackOff).
const (
	reasonImagePull        = status.ErrImagePull
	reasonImagePullBackOff = status.ImagePullBackOff
)

// The kubelet's image pull back-off (pkg/kubelet/kubelet.go: imageBackOffPeriod,
// MaxImageBackOff, flowcontrol.NewBackOff), per pod and image: 10s doubling to
// 5m, started over by a failure more than 2×5m after the last one.
const (
	pullBackoffInitial = 10 * time.Second
	pullBackoffMax     = 5 * time.Minute
)

// Puller brings the images pods name into the store the runtime starts
// containers from.
type Puller interface {
	// Present returns the ID of the store's image that image (a normalised
	// reference) names, "" for none, without any network access.
	Present(image string) (id string, err error)
	// Pull fetches image from its registry, or its mirrors, into the store,
	// and returns the ID of the image it got; an image the store has under
	// the registry's digest is not fetched again.
	Pull(ctx context.Context, image string, o PullOptions) (id string, err error)
}

// PullOptions are how one image pull is made.
type PullOptions struct {
	// Progress, if not nil, is told how far the pull got, on the caller's
	// goroutine.
	Progress func(string)
	// Critical: the pull is for a critical pod (eviction.Critical) and
	// waits behind no other pull.
	Critical bool
	// Secrets are the pod's image pull secrets found, in its order.
	Secrets []podspec.PullSecret
	// As, for an image by digest, is the tag it was resolved from (a
	// followed tag's new digest): the image policy judges it as that tag,
	// as a pull of the tag would be.
	As string
}

// Manager pulls the images of one pod worker's containers, and keeps their
// pull back-off. It is used from the worker's goroutine only.
type Manager struct {
	puller Puller // nil: nothing is pulled
	events *events.Recorder
	logger *slog.Logger
	// nextResync returns a channel closed at the agent's next Resync,
	// which an image import makes.
	nextResync func() <-chan struct{}

	// backoff is the pull back-off, by pod UID and image; failures the last
	// failed pull of each key it has an entry for.
	backoff  *flowcontrol.Backoff
	failures map[string]failure
}

// NewManager returns the image manager of one pod worker. Without a puller,
// nothing is pulled: a missing image is the runtime's ErrImageNotPresent.
func NewManager(p Puller, rec *events.Recorder, nextResync func() <-chan struct{}, logger *slog.Logger) *Manager {
	return &Manager{
		puller:     p,
		events:     rec,
		logger:     logger,
		nextResync: nextResync,
		backoff:    flowcontrol.NewBackOff(pullBackoffInitial, pullBackoffMax),
		failures:   map[string]failure{},
	}
}

// failure is the last failed pull of a key of the pull back-off: its error,
// for ImagePullBackOff's message, and when its back-off began.
type failure struct {
	reason, msg string
	at          time.Time
	refused     bool // the start was refused (Refused), not the pull
	// resynced, of a refused start: closed at the first Resync after it.
	resynced <-chan struct{}
}

// PullFailure is the waiting reason and message of a container whose image
// failed to come, from the error's text (msg) as the kubelet's
// evalCRIPullErr makes them, the error having crossed the CRI: a policy's
// refusal ("SignatureValidationFailed: DETAIL") is SignatureValidationFailed,
// "image pull failed for IMAGE because the signature validation failed:
// DETAIL"; any other, ErrImagePull with the text as it is. The runtime's
// refusal of a present image at its start is said the same way.
func PullFailure(image, msg string) (reason, message string) {
	if detail, ok := strings.CutPrefix(msg, status.SignatureValidationFailed); ok {
		return status.SignatureValidationFailed, podspec.Truncate(
			fmt.Sprintf("image pull failed for %s because the signature validation failed%s", image, detail), podspec.MaxOutput)
	}
	return reasonImagePull, msg
}

// Request is one container's image to make sure of before its start.
type Request struct {
	Pod       *v1.Pod
	Container *v1.Container
	Image     string // the normalised reference
	// First: the container has never run in this pod yet.
	First bool
	// Waiting sets why the container waits, shown in its status; Publish
	// shows it at once (the pull's progress).
	Waiting func(reason, message string)
	Publish func()
	// Secret looks up the Secret namespace/name the node has (the object
	// set's), for the pod's imagePullSecrets; nil: none.
	Secret func(namespace, name string) *v1.Secret
}

// Ensured is the image Ensure made sure of.
type Ensured struct {
	// ImageID is the store's image the container is to run, as found or
	// pulled (and verified) now: the one the container starts from, not
	// whatever its reference names by then, which an import, a pull or a
	// tag moved since may have changed. "" when nothing was looked up
	// (imagePullPolicy Never, no puller): the runtime resolves the
	// reference, once, at the start.
	ImageID string
	// Pulled: a pull brought it.
	Pulled bool
}

// Ensure applies the container's imagePullPolicy before its start, as the
// kubelet's imageManager.EnsureImageExists: Never and a present image with
// IfNotPresent go on without network; Always, and IfNotPresent with the image
// missing, pull, with a back-off per pod and image after a failure. It
// returns false, with when to try again, if the container cannot start yet.
func (m *Manager) Ensure(ctx context.Context, r Request) (e Ensured, ok bool, retry time.Time) {
	p, pod, c, image := m.puller, r.Pod, r.Container, r.Image
	key := string(pod.UID) + "_" + image
	// A start the image policy refused waits out the pull back-off whatever
	// wakes the worker meanwhile (a sync, a status publish): nothing below
	// would, the image being present or not pulled at all. But a Resync (a
	// reload, which may have fixed the policy; an import) has it try again
	// now, as every waiting pod.
	if f := m.failures[key]; f.refused && m.backoff.IsInBackOffSinceUpdate(key, time.Now()) && !closed(f.resynced) {
		r.Waiting(f.reason, f.msg)
		return Ensured{}, false, f.at.Add(m.backoff.Get(key))
	}
	if p == nil || c.ImagePullPolicy == v1.PullNever {
		return Ensured{}, true, time.Time{}
	}
	ref := events.ContainerRef(pod, c.Name)
	var arrived <-chan struct{}
	if c.ImagePullPolicy != v1.PullAlways {
		// Taken before the lookup: an import after it ends the pull below.
		arrived = m.nextResync()
		id, err := p.Present(image)
		if err != nil {
			// The kubelet's ErrImageInspect.
			msg := fmt.Sprintf("Failed to inspect image %q: %v", c.Image, err)
			r.Waiting("ImageInspectError", msg)
			m.events.Eventf(ref, v1.EventTypeWarning, "InspectFailed", "%s", msg)
			return Ensured{}, false, time.Now().Add(pullBackoffInitial)
		}
		if id != "" {
			return Ensured{ImageID: id}, true, time.Time{}
		}
	}
	now := time.Now()
	// The kubelet's imageManager.EnsureImageExists: IsInBackOffSinceUpdate.
	if m.backoff.IsInBackOffSinceUpdate(key, now) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		m.events.Eventf(ref, v1.EventTypeNormal, events.BackOff, "%s", msg)
		prev := m.failures[key]
		if prev.msg != "" {
			msg += ": " + prev.reason + ": " + prev.msg
		}
		r.Waiting(reasonImagePullBackOff, msg)
		return Ensured{}, false, prev.at.Add(m.backoff.Get(key))
	}
	secrets, missing := pullSecrets(pod, r.Secret)
	// The names, as many as a manifest holds, in one bounded line.
	missingNames := podspec.Truncate(strings.Join(missing, ", "), podspec.MaxOutput)
	if len(missing) > 0 {
		m.logger.Info("Unable to retrieve pull secret, the image pull may not succeed.", "namespace", pod.Namespace, "secrets", missingNames, "container", c.Name)
	}
	m.events.Eventf(ref, v1.EventTypeNormal, events.Pulling, "Pulling image %q", c.Image)
	m.logger.Info("pulling image", "container", c.Name, "image", image, "policy", c.ImagePullPolicy)
	// A container never started yet waits ContainerCreating, with the pull's
	// progress; one being restarted keeps the reason it waits with
	// (CrashLoopBackOff, ErrImagePull...) until the start, as the kubelet's
	// status keeps its reason cache's.
	var progress func(string)
	if r.First {
		r.Waiting(status.ContainerCreating, fmt.Sprintf("Pulling image %q", c.Image))
		r.Publish()
		progress = func(s string) {
			r.Waiting(status.ContainerCreating, fmt.Sprintf("Pulling image %q: %s", c.Image, s))
			r.Publish()
		}
	}
	began := time.Now()
	pullCtx, cancel := context.WithCancelCause(ctx)
	var watching sync.WaitGroup
	defer watching.Wait()
	defer cancel(nil)
	if arrived != nil {
		watching.Go(func() { cancelOnArrival(pullCtx, cancel, p, image, m.nextResync, arrived) })
	}
	id, err := p.Pull(pullCtx, image, PullOptions{Progress: progress, Critical: eviction.Critical(pod), Secrets: secrets})
	if ctx.Err() != nil {
		return Ensured{}, false, time.Time{}
	}
	if err != nil && arrived != nil {
		if id, perr := p.Present(image); perr == nil && id != "" {
			// Imported while the pull went on (or failed): IfNotPresent
			// is satisfied, and the registry's answer no longer matters.
			m.logger.Info("image present now; pull not needed", "container", c.Name, "image", image)
			m.forget(key)
			if r.First {
				r.Waiting("", "")
			}
			return Ensured{ImageID: id}, true, time.Time{}
		}
		if errors.Is(context.Cause(pullCtx), errImageArrived) {
			return Ensured{}, false, time.Now() // removed again at once: look again
		}
	}
	if err != nil {
		// A registry's error body is in it (go-containerregistry reads 64 KiB
		// of one): kept, logged and shown cut to MaxOutput.
		msg := podspec.Truncate(err.Error(), podspec.MaxOutput)
		if hint := presentAnyway(p, c, image); hint != "" {
			msg += "; " + hint
		}
		m.logger.Warn("image pull failed", "container", c.Name, "image", image, "err", msg)
		m.events.Eventf(ref, v1.EventTypeWarning, events.Failed, "Failed to pull image %q: %s", c.Image, msg)
		reason, msg := PullFailure(c.Image, msg)
		m.events.Eventf(ref, v1.EventTypeWarning, events.Failed, "Error: %s", reason)
		if len(missing) > 0 {
			// The kubelet's, after a sync whose pull failed.
			m.events.Eventf(events.PodRef(pod), v1.EventTypeWarning, events.FailedToRetrieveImagePullSecret,
				"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", missingNames)
		}
		return Ensured{}, false, m.failed(key, r, reason, msg)
	}
	m.events.Eventf(ref, v1.EventTypeNormal, events.Pulled, "Successfully pulled image %q in %v", c.Image, time.Since(began).Truncate(time.Millisecond))
	if r.First {
		r.Waiting("", "")
	}
	m.forget(key)
	return Ensured{ImageID: id, Pulled: true}, true, time.Time{}
}

// failed counts a failure of r's image in its pull back-off, has the
// container wait with reason and msg, and returns when to try again.
func (m *Manager) failed(key string, r Request, reason, msg string) time.Time {
	m.backoff.Next(key, m.backoff.Clock.Now())
	// Taken after Next: the back-off runs until no earlier than this.
	at := time.Now()
	m.failures[key] = failure{reason: reason, msg: msg, at: at}
	r.Waiting(reason, msg)
	return at.Add(m.backoff.Get(key))
}

// Refused takes the runtime's refusal to start r's container from an image
// the store has but the image policy refuses now (podspec.ErrImageRefused;
// a policy turned on or changed since the image arrived): the container
// waits as after a pull the policy refused, SignatureValidationFailed with
// the kubelet's message, and tries again after the pull back-off. It
// returns when.
func (m *Manager) Refused(r Request, err error) time.Time {
	pod, c := r.Pod, r.Container
	text := err.Error()
	if i := strings.Index(text, status.SignatureValidationFailed); i >= 0 {
		text = text[i:]
	} else {
		text = status.SignatureValidationFailed + ": " + text
	}
	reason, msg := PullFailure(c.Image, podspec.Truncate(text, podspec.MaxOutput))
	m.logger.Warn("image refused by the image policy", "container", c.Name, "image", r.Image, "err", text)
	ref := events.ContainerRef(pod, c.Name)
	m.events.Eventf(ref, v1.EventTypeWarning, events.Failed, "%s", msg)
	m.events.Eventf(ref, v1.EventTypeWarning, events.Failed, "Error: %s", reason)
	key := string(pod.UID) + "_" + r.Image
	resynced := m.nextResync()
	retry := m.failed(key, r, reason, msg)
	f := m.failures[key]
	f.refused, f.resynced = true, resynced
	m.failures[key] = f
	return retry
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// pullSecrets are the Docker configs of pod's imagePullSecrets that lookup
// finds, in the pod's order, and the names of those it does not, as the
// kubelet's getPullSecretsForPod and secretsToTrackedDockerConfigs: an entry
// without a name is skipped, and a Secret of another type, or without its
// type's key, is not used (nor said).
func pullSecrets(pod *v1.Pod, lookup func(namespace, name string) *v1.Secret) (found []podspec.PullSecret, missing []string) {
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		var s *v1.Secret
		if lookup != nil {
			s = lookup(pod.Namespace, ref.Name)
		}
		if s == nil {
			missing = append(missing, ref.Name)
			continue
		}
		name := s.Namespace + "/" + s.Name
		if b := s.Data[v1.DockerConfigJsonKey]; s.Type == v1.SecretTypeDockerConfigJson && len(b) > 0 {
			found = append(found, podspec.PullSecret{Name: name, Config: b})
		} else if b := s.Data[v1.DockerConfigKey]; s.Type == v1.SecretTypeDockercfg && len(b) > 0 {
			found = append(found, podspec.PullSecret{Name: name, Config: b, Legacy: true})
		}
	}
	return found, missing
}

// presentAnyway says, when a pull with policy Always failed, that the image is
// in the store all the same, and the fix: the kubelet's behaviour is kept
// (Always pulls, :latest and untagged images default to it), but a node with
// no registry (an imported image) otherwise reads only a DNS error.
func presentAnyway(p Puller, c *v1.Container, image string) string {
	if c.ImagePullPolicy != v1.PullAlways {
		return ""
	}
	if id, err := p.Present(image); err != nil || id == "" {
		return ""
	}
	return fmt.Sprintf("the image %q is in the node's image store, but imagePullPolicy Always "+
		"(the default for an image tagged :latest or untagged) pulls it every start: "+
		"set imagePullPolicy: IfNotPresent to run it without the registry", c.Image)
}

// Forget drops the pull back-off of every image of pod uid: the pod is gone,
// or starts afresh.
func (m *Manager) Forget(uid string) {
	for k := range m.failures {
		if strings.HasPrefix(k, uid+"_") {
			m.forget(k)
		}
	}
}

// forget drops the pull back-off of key (pod UID and image). failures holds
// a key exactly while the back-off has an entry for it, so that a pod's
// entries can be found again when it goes.
func (m *Manager) forget(key string) {
	m.backoff.DeleteEntry(key)
	delete(m.failures, key)
}

// errImageArrived ends a pull whose image came into the store another way.
var errImageArrived = errors.New("image present in the store")

// cancelOnArrival cancels a pull of image, with errImageArrived, once the
// image is in the store: it looks at each Resync (which an import makes)
// from arrived on, until ctx ends. Without it a worker whose pull hangs on
// an unanswering registry would start its container only when the pull
// gives up, though the import's Resync came long before.
func cancelOnArrival(ctx context.Context, cancel context.CancelCauseFunc, p Puller, image string, next func() <-chan struct{}, arrived <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-arrived:
		}
		arrived = next() // before the lookup, as the first one
		if id, err := p.Present(image); err == nil && id != "" {
			cancel(errImageArrived)
			return
		}
	}
}
