package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/images"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Bounds of debug containers: each holds a rootfs, a cgroup and a process
// tree for as long as its client stays, so a client may not pile them up.
const (
	MaxDebugPerPod  = 4
	MaxDebugPerNode = 16
	// MaxDebugArgs and MaxDebugArgBytes bound a debug container's command,
	// which the daemon keeps in the pod's status while it runs.
	MaxDebugArgs     = 256
	MaxDebugArgBytes = 64 << 10
)

// debugContainerPrefix is kubectl debug's default container name prefix:
// the name is the prefix and five random characters.
const debugContainerPrefix = "debugger-"

// debugs are the debug containers running, by pod UID.
type debugs struct {
	mu    sync.Mutex
	byUID map[string][]*debugSession
	n     int // every pod's
}

// debugSession is one debug container while its request lasts.
type debugSession struct {
	uid     string
	id      string // the runtime's, once the container runs; guarded by debugs.mu
	spec    v1.EphemeralContainer
	started time.Time // when its process began to run; guarded by debugs.mu
	// cancel ends the container (nil until it runs); stopped says its pod
	// is being removed. Both guarded by debugs.mu.
	cancel  context.CancelCauseFunc
	stopped bool
	done    chan struct{} // closed once the runtime removed the container
}

// errPodRemoved ends a debug container whose pod is removed.
var errPodRemoved = errors.New("the pod is being removed")

// Debug prepares an ephemeral container for pod namespace/name as req says:
// it checks the request and the pod, and takes one of the pod's and the
// node's debug slots. The container runs when run is called, which must be
// called once (with a context already ended it only gives the slot back):
// run makes sure of the image (imagePullPolicy IfNotPresent), runs the
// container with spec's streams (spec.Cmd is req.Cmd) until its process
// exits, ctx ends or the pod is removed, and returns its exit code once
// every trace of it is gone. Errors wrap
// podspec.ErrDebugInvalid, podspec.ErrDebugLimit, podspec.ErrNotExist (no
// such pod or target) or podspec.ErrNotRunning (the target is not running).
func (a *Agent) Debug(namespace, name string, req podspec.DebugRequest) (run func(ctx context.Context, spec podspec.ExecSpec) (int, error), err error) {
	image, err := checkDebug(req)
	if err != nil {
		return nil, err
	}
	v := a.published()
	pod := v.find(namespace, name)
	if pod == nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, podspec.ErrNotExist)
	}
	if pod.DeletionTimestamp != nil {
		return nil, &notRunningError{fmt.Sprintf("pod %s/%s is terminating", namespace, name)}
	}
	target := ""
	if req.Target != "" {
		if target, err = v.execTarget(namespace, name, req.Target); err != nil {
			return nil, err
		}
	}
	ec := v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name:                     debugName(pod),
			Image:                    req.Image,
			Command:                  req.Cmd,
			Stdin:                    req.Stdin,
			TTY:                      req.TTY,
			ImagePullPolicy:          v1.PullIfNotPresent,
			TerminationMessagePolicy: v1.TerminationMessageReadFile,
		},
		TargetContainerName: req.Target,
	}
	s, err := a.debugs.add(string(pod.UID), ec)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return func(ctx context.Context, es podspec.ExecSpec) (int, error) {
		defer a.debugEnded(s)
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		a.debugs.mu.Lock()
		s.cancel = cancel
		if s.stopped {
			cancel(errPodRemoved)
		}
		a.debugs.mu.Unlock()
		if ctx.Err() != nil {
			return -1, context.Cause(ctx) // the client left, or the pod went
		}
		a.statuses.Touch()
		c := (*v1.Container)(&ec.EphemeralContainerCommon)
		// The pull's events name the ephemeral container, as the kubelet's.
		pod := pod.DeepCopy()
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, ec)
		m := images.NewManager(a.cfg.Images, a.events, a.nextResync, a.logger.With("pod", namespace+"/"+name, "debug", ec.Name))
		var why string
		ensured, ok, _ := m.Ensure(ctx, images.Request{Pod: pod, Container: c, Image: image, First: true,
			Waiting: func(reason, message string) { why = reason + ": " + message }, Publish: func() {}, Secret: a.objects.Load().Secret})
		if !ok {
			if ctx.Err() != nil {
				return -1, context.Cause(ctx)
			}
			return -1, fmt.Errorf("image %s: %s", req.Image, why)
		}
		spec, err := a.conv.Container(pod, c, 0)
		if err != nil {
			return -1, fmt.Errorf("%w: %w", podspec.ErrDebugInvalid, err)
		}
		spec.ImageID = ensured.ImageID
		es.Cmd = req.Cmd
		code, err := a.rt.Debug(ctx, a.conv.Sandbox(pod), spec, target, es, func(id string) {
			a.debugs.mu.Lock()
			s.id, s.started = id, time.Now()
			a.debugs.mu.Unlock()
			a.statuses.Touch()
			// The events of a start of the pod's own containers.
			ref := events.ContainerRef(pod, ec.Name)
			if !ensured.Pulled {
				a.events.Eventf(ref, v1.EventTypeNormal, events.Pulled, "Container image %q already present on machine", ec.Image)
			}
			a.events.Eventf(ref, v1.EventTypeNormal, events.Created, "Container created")
			a.events.Eventf(ref, v1.EventTypeNormal, events.Started, "Container started")
		})
		if err != nil && errors.Is(context.Cause(ctx), errPodRemoved) {
			err = fmt.Errorf("%w: %w", errPodRemoved, err)
		}
		return code, err
	}, nil
}

// checkDebug checks what a debug request asks for, whatever the pod, and
// returns its image's reference in full.
func checkDebug(req podspec.DebugRequest) (string, error) {
	cmd := req.Cmd
	if len(cmd) == 0 {
		return "", fmt.Errorf("%w: no command", podspec.ErrDebugInvalid)
	}
	if len(cmd) > MaxDebugArgs {
		return "", fmt.Errorf("%w: %d arguments, at most %d", podspec.ErrDebugInvalid, len(cmd), MaxDebugArgs)
	}
	n := 0
	for _, s := range cmd {
		n += len(s)
	}
	if n > MaxDebugArgBytes {
		return "", fmt.Errorf("%w: the command is %d bytes, at most %d", podspec.ErrDebugInvalid, n, MaxDebugArgBytes)
	}
	if req.Image == "" {
		return "", fmt.Errorf("%w: no image", podspec.ErrDebugInvalid)
	}
	image, err := podspec.NormalizeImage(req.Image)
	if err != nil {
		return "", fmt.Errorf("%w: %w", podspec.ErrDebugInvalid, err)
	}
	return image, nil
}

// debugName is a name of no container of pod, as kubectl debug's
// computeDebugContainerName makes one.
func debugName(pod *v1.Pod) string {
	taken := map[string]bool{}
	for _, c := range slices.Concat(pod.Spec.Containers, pod.Spec.InitContainers) {
		taken[c.Name] = true
	}
	for _, c := range pod.Spec.EphemeralContainers {
		taken[c.Name] = true
	}
	for {
		if n := debugContainerPrefix + utilrand.String(5); !taken[n] {
			return n
		}
	}
}

// add takes a debug slot of pod uid for ec, if the pod and the node have one.
func (d *debugs) add(uid string, ec v1.EphemeralContainer) (*debugSession, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n >= MaxDebugPerNode {
		return nil, fmt.Errorf("%w: %d run on the node, at most %d", podspec.ErrDebugLimit, d.n, MaxDebugPerNode)
	}
	if n := len(d.byUID[uid]); n >= MaxDebugPerPod {
		return nil, fmt.Errorf("%w: %d run in the pod, at most %d", podspec.ErrDebugLimit, n, MaxDebugPerPod)
	}
	if d.byUID == nil {
		d.byUID = map[string][]*debugSession{}
	}
	s := &debugSession{uid: uid, spec: ec, done: make(chan struct{})}
	d.byUID[uid] = append(d.byUID[uid], s)
	d.n++
	return s, nil
}

// debugEnded gives s's slot back, once its container is gone.
func (a *Agent) debugEnded(s *debugSession) {
	d := &a.debugs
	d.mu.Lock()
	d.byUID[s.uid] = slices.DeleteFunc(d.byUID[s.uid], func(x *debugSession) bool { return x == s })
	if len(d.byUID[s.uid]) == 0 {
		delete(d.byUID, s.uid)
	}
	d.n--
	d.mu.Unlock()
	close(s.done)
	a.statuses.Touch()
}

// stopDebug ends the debug containers of pod uid and waits until they are
// gone, or ctx ends: a pod's debug containers go with it, and before its
// sandbox, whose cgroup holds theirs.
func (a *Agent) stopDebug(ctx context.Context, uid string) {
	d := &a.debugs
	d.mu.Lock()
	sessions := slices.Clone(d.byUID[uid])
	for _, s := range sessions {
		s.stopped = true
		if s.cancel != nil {
			s.cancel(errPodRemoved)
		}
	}
	d.mu.Unlock()
	for _, s := range sessions {
		select {
		case <-s.done:
		case <-ctx.Done():
			return
		}
	}
}

// withDebug adds to pods the debug containers running in them, as the
// kubelet shows ephemeral containers: in spec.ephemeralContainers and in
// status.ephemeralContainerStatuses, never ready, waiting with
// ContainerCreating (its image's pull, its creation) until its process runs.
func (d *debugs) withDebug(pods []v1.Pod) []v1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		return pods
	}
	for i := range pods {
		p := &pods[i]
		for _, s := range d.byUID[string(p.UID)] {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, s.spec)
			cs := v1.ContainerStatus{Name: s.spec.Name, Image: s.spec.Image, Started: new(false),
				State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reasonCreating}}}
			if s.id != "" {
				cs.ContainerID, cs.Started = containerIDPrefix+s.id, new(true)
				cs.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(s.started)}}
			}
			p.Status.EphemeralContainerStatuses = append(p.Status.EphemeralContainerStatuses, cs)
		}
	}
	return pods
}
