package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/staticpodd/staticpodd/agent/events"
)

// rejectMessage is the message of events.StaticPodsOnly's event; the pod's
// status.message is it after "Pod was rejected: ", as the kubelet's rejectPod
// writes them.
func rejectMessage(node string) string {
	return fmt.Sprintf("node %s is run by staticpodd, which runs only the static pods of its manifests, "+
		"never a pod from the API server; the node is unschedulable: schedule the pod to a node run by a kubelet", node)
}

// rejecter fails every pod the API server binds to this node that is not a
// mirror pod, as the kubelet fails a pod it cannot admit (rejectPod): status
// phase Failed with events.StaticPodsOnly, through the node's credentials, and
// a Warning event on the pod. The Node is unschedulable, so only pods that
// tolerate that (a DaemonSet's) or that were made with spec.nodeName come
// here; their controllers see a failed pod and back off (the DaemonSet
// controller's failedPodsBackoff), and nothing stays Pending unexplained.
//
// A hostile user may bind thousands of pods to the node: the rejecter holds
// only a reference (namespace, name, UID) of at most maxRejectQueue pods, and
// reads each pod again when its turn comes. Pods offered beyond that are
// dropped, and once the queue has drained the watch lists the node's pods
// again (relist), which offers them anew.
type rejecter struct {
	m      *Mirror
	client api
	limit  flowcontrol.RateLimiter // on top of the client's QPS: mirror pods keep theirs

	mu         sync.Mutex
	queue      []podRef           // FIFO of pods to reject
	queued     map[types.UID]bool // in queue or waiting for a retry
	overflowed bool               // a pod was dropped since the queue last drained
	kick       chan struct{}      // one slot: queue is not empty
	relist     chan struct{}      // one slot: the watch should list again
}

type podRef struct {
	namespace, name string
	uid             types.UID
	tries           int
}

// The rejecter's bounds: how many pods it holds a reference to, how fast it
// fails them (each costs a get, a status patch and an event), and the back-off
// of a failed try and how many tries a pod gets (then it waits for its next
// watch event or list).
const (
	maxRejectQueue = 256
	rejectQPS      = 5
	rejectBurst    = 10
	rejectRetryMax = 30 * time.Second
	rejectMaxTries = 10
)

func newRejecter(m *Mirror, client api) *rejecter {
	return &rejecter{
		m: m, client: client,
		limit:  flowcontrol.NewTokenBucketRateLimiter(rejectQPS, rejectBurst),
		queued: map[types.UID]bool{},
		kick:   make(chan struct{}, 1),
		relist: make(chan struct{}, 1),
	}
}

// needsRejecting reports whether p, a pod on this node, is one the rejecter
// must act on: not a mirror pod, and not Failed or Succeeded already (unless
// it is being deleted: the API server waits for the node to delete it).
func needsRejecting(p *v1.Pod) bool {
	if p.Annotations[AnnotationMirror] != "" {
		return false
	}
	return !terminal(p.Status.Phase) || p.DeletionTimestamp != nil
}

func terminal(phase v1.PodPhase) bool { return phase == v1.PodFailed || phase == v1.PodSucceeded }

// offer queues p when it needs rejecting and is not queued yet.
func (r *rejecter) offer(p *v1.Pod) {
	if !needsRejecting(p) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queued[p.UID] {
		return
	}
	if len(r.queued) >= maxRejectQueue {
		r.overflowed = true
		return
	}
	r.queued[p.UID] = true
	r.queue = append(r.queue, podRef{namespace: p.Namespace, name: p.Name, uid: p.UID})
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// next takes the oldest queued pod; false when there is none.
func (r *rejecter) next() (podRef, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return podRef{}, false
	}
	ref := r.queue[0]
	r.queue[0] = podRef{}
	r.queue = r.queue[1:]
	return ref, true
}

// done forgets ref; once nothing is held and a pod was dropped meanwhile,
// it asks the watch to list again.
func (r *rejecter) done(ref podRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.queued, ref.uid)
	if len(r.queued) == 0 && r.overflowed {
		r.overflowed = false
		select {
		case r.relist <- struct{}{}:
		default:
		}
	}
}

// retry queues ref again after its back-off: a second doubling to
// rejectRetryMax. It keeps its place in queued meanwhile, so that the
// bound holds.
func (r *rejecter) retry(ref podRef) {
	ref.tries++
	d := jitter(min(time.Second<<(ref.tries-1), rejectRetryMax))
	time.AfterFunc(d, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.queue = append(r.queue, ref)
		select {
		case r.kick <- struct{}{}:
		default:
		}
	})
}

func (r *rejecter) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		}
		for {
			ref, ok := r.next()
			if !ok {
				break
			}
			if r.limit.Wait(ctx) != nil {
				return
			}
			err := r.reject(ctx, ref)
			r.m.report("pods bound to the node", err)
			if err != nil && ctx.Err() == nil && ref.tries+1 < rejectMaxTries {
				r.retry(ref)
			} else {
				r.done(ref)
			}
		}
	}
}

// reject fails the pod ref names, read anew, unless it is gone, replaced,
// no longer on this node, a mirror pod, or finished already; a pod being
// deleted is then deleted at once, as the kubelet's status manager deletes a
// finished pod whose deletion waits for its node.
func (r *rejecter) reject(ctx context.Context, ref podRef) error {
	pods := r.client.Pods(ref.namespace)
	p, err := pods.Get(ctx, ref.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod %s/%s: %s", ref.namespace, ref.name, oneLine(err))
	}
	if p.UID != ref.uid || p.Spec.NodeName != r.m.cfg.NodeName || !needsRejecting(p) {
		return nil
	}
	if !terminal(p.Status.Phase) {
		js, err := json.Marshal(rejectedStatus(p, r.m.cfg.NodeName, metav1.Now()))
		if err != nil {
			return fmt.Errorf("encode status: %w", err)
		}
		patch, _, err := statusPatch(p, js)
		if err != nil {
			return err
		}
		_, err = pods.Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone or replaced meanwhile (the UID precondition)
		}
		if err != nil {
			return fmt.Errorf("fail pod %s/%s (uid %s): %s", p.Namespace, p.Name, p.UID, oneLine(err))
		}
		r.m.logger.Info("failed a pod the API server bound to the node: staticpodd runs static pods only",
			"pod", p.Namespace+"/"+p.Name, "uid", p.UID)
		// The pod's own reference, as the kubelet's recorder makes it.
		ev := events.Make(r.m.cfg.NodeName, v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name,
			UID: p.UID, ResourceVersion: p.ResourceVersion}, v1.EventTypeWarning, events.StaticPodsOnly, rejectMessage(r.m.cfg.NodeName))
		select {
		case r.m.apiPodEvents <- *ev:
		default:
		}
	}
	if p.DeletionTimestamp == nil {
		return nil
	}
	zero := int64(0)
	err = pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s (uid %s): %s", p.Namespace, p.Name, p.UID, oneLine(err))
	}
	return nil
}

// rejectedStatus is the status the kubelet's rejectPod gives p, as its status
// manager then sends it (updateStatusInternal, mergePodStatus): phase Failed,
// the reason and message, the QoS class kept, the start time kept or now, the
// conditions the kubelet does not own kept and those it owns dropped (the pod
// never ran here), the resource claims' statuses kept.
func rejectedStatus(p *v1.Pod, node string, now metav1.Time) v1.PodStatus {
	old := p.Status
	s := v1.PodStatus{
		Phase:                                v1.PodFailed,
		Reason:                               events.StaticPodsOnly,
		Message:                              "Pod was rejected: " + rejectMessage(node),
		QOSClass:                             old.QOSClass,
		StartTime:                            old.StartTime,
		ObservedGeneration:                   max(old.ObservedGeneration, p.Generation),
		VolumeHealth:                         old.VolumeHealth,
		ResourceClaimStatuses:                old.ResourceClaimStatuses,
		ExtendedResourceClaimStatus:          old.ExtendedResourceClaimStatus,
		NodeAllocatableResourceClaimStatuses: old.NodeAllocatableResourceClaimStatuses,
	}
	if s.StartTime == nil || s.StartTime.IsZero() {
		s.StartTime = &now
	}
	for _, c := range old.Conditions {
		if !kubeletCondition[c.Type] {
			s.Conditions = append(s.Conditions, c)
		}
	}
	return s
}

// kubeletCondition are the pod conditions the kubelet owns
// (kubetypes.PodConditionByKubelet, with the feature gates on by default).
var kubeletCondition = map[v1.PodConditionType]bool{
	v1.PodScheduled: true, v1.PodReady: true, v1.PodInitialized: true, v1.ContainersReady: true,
	v1.PodResizeInProgress: true, v1.PodResizePending: true, v1.PodReadyToStartContainers: true,
}
