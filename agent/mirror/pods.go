package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/status"
)

// AnnotationMirror marks a mirror pod; its value is the static pod's
// config hash (kubetypes.ConfigMirrorAnnotationKey).
const AnnotationMirror = "kubernetes.io/config.mirror"

// podSync keeps one mirror pod per static pod. Three inputs mark a pod
// name dirty: the agent's watch (the static pod or its status changed), the
// watch of this node's pods on the API server (someone changed or deleted a
// mirror pod) and retries after a failure. One goroutine syncs dirty names,
// so the API server's slowness delays only mirror pods. A sync reads the
// static pod from the status manager, through the watch, when it runs: the
// mirror keeps no copy of it, only what it knows of the API server's side.
type podSync struct {
	m      *Mirror
	pods   Watch // the agent's static pods
	client api
	watch  api // without the requests' timeout
	// rejects fails the node's pods that are not mirror pods, which the
	// watch of the node's pods offers it.
	rejects *rejecter

	mu       sync.Mutex          // guards the fields below
	mirrors  map[string]*v1.Pod  // this node's mirror pods on the API server, by full name
	dirty    map[string]bool     // names to sync
	retry    map[string]*backoff // back-off of names whose last sync failed
	waiting  map[string]bool     // names in their back-off: synced when it ends, not before
	patched  map[string]patched  // the status last patched, by mirror pod UID
	failures map[string]error    // the last failure of each name
	kick     chan struct{}       // one slot: something is dirty
	// statusLimit rate-limits status patches, on top of the client's QPS:
	// a pod whose status flaps (a probe) cannot crowd out the others.
	statusLimit flowcontrol.RateLimiter
}

// patched is what was last patched onto a mirror pod: the status, as JSON,
// and the static pod it is the status of, the status manager's own (kept:
// it never changes). A sync that finds the pod Same again, as a resync of
// a pod of which nothing changed does, has nothing to patch and nothing
// to encode; one kept per mirror pod, forgotten with it.
//
// rv is the mirror pod's resourceVersion that the patch made (or found its
// status in): a mirror pod at another one was written since by someone else
// (the node lifecycle controller marking it not ready, kubectl, a status
// patch whose answer was lost), and its status is compared again with the
// static pod's, as the kubelet's status manager compares the mirror pod it
// reads with its own (needsReconcile), not only with what it sent.
type patched struct {
	pod  status.Shared
	json string
	rv   string
}

// Status patches: statusQPS a second, statusBurst at once; a patch over the
// limit is made statusDelay later, with whatever status the pod has then.
const (
	statusQPS   = 10
	statusBurst = 20
	statusDelay = 200 * time.Millisecond
)

func newPodSync(m *Mirror, pods Watch, client, watch api) *podSync {
	return &podSync{
		m: m, pods: pods, client: client, watch: watch, rejects: newRejecter(m, client),
		mirrors: map[string]*v1.Pod{}, dirty: map[string]bool{},
		retry: map[string]*backoff{}, waiting: map[string]bool{}, patched: map[string]patched{}, failures: map[string]error{},
		kick:        make(chan struct{}, 1),
		statusLimit: flowcontrol.NewTokenBucketRateLimiter(statusQPS, statusBurst),
	}
}

func (s *podSync) run(ctx context.Context) {
	pw := s.pods
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.watchMirrors(ctx) })
	wg.Go(func() { s.rejects.run(ctx) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-pw.C():
				s.take(pw.Next())
			}
		}
	})
	if _, ok := s.m.nodeUID(ctx); !ok {
		return
	}
	// A periodic full pass catches what a lost watch event would miss.
	resync := time.NewTicker(time.Minute)
	defer resync.Stop()
	for {
		s.syncDirty(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-resync.C:
			s.markAll()
		}
	}
}

// take marks the names of the agent's changed pods.
func (s *podSync) take(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		s.markLocked(name)
	}
}

func (s *podSync) markLocked(name string) {
	s.dirty[name] = true
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *podSync) markAll() {
	static := s.pods.Keys()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range static {
		s.markLocked(name)
	}
	for name := range s.mirrors {
		s.markLocked(name)
	}
}

// syncDirty syncs every dirty name once; a failed one is marked again after
// its back-off.
func (s *podSync) syncDirty(ctx context.Context) {
	s.mu.Lock()
	names := s.dirty
	s.dirty = map[string]bool{}
	s.mu.Unlock()
	for name := range names {
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		wait := s.waiting[name]
		s.mu.Unlock()
		if wait {
			continue
		}
		err := s.sync(ctx, name)
		s.mu.Lock()
		if err == nil {
			delete(s.retry, name)
			delete(s.failures, name)
		} else {
			s.failures[name] = err
			bo := s.retry[name]
			if bo == nil {
				bo = newBackoff(retryBase, retryMax)
				s.retry[name] = bo
			}
			d := bo.next()
			if notYet(err) {
				// The API server is starting: the PriorityClass a
				// mirror pod needs comes within a second or so.
				d = jitter(retryBase)
			}
			s.waiting[name] = true
			time.AfterFunc(d, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				delete(s.waiting, name)
				s.markLocked(name)
			})
		}
		s.mu.Unlock()
	}
	s.reportFailures()
}

// The back-off of a mirror pod's sync: short, so that the mirror pods catch
// up within seconds of the API server answering again.
const (
	retryBase = 100 * time.Millisecond
	retryMax  = 5 * time.Second
)

func (s *podSync) reportFailures() {
	s.mu.Lock()
	var msgs []string
	for name, err := range s.failures {
		msgs = append(msgs, name+": "+err.Error())
	}
	s.mu.Unlock()
	if len(msgs) == 0 {
		s.m.report("mirror pods", nil)
		return
	}
	if len(msgs) > 3 {
		msgs = append(msgs[:3], fmt.Sprintf("and %d more", len(msgs)-3))
	}
	s.m.report("mirror pods", fmt.Errorf("%s", strings.Join(msgs, "; ")))
}

// notYet reports an error the API server gives while its post-start hooks
// have not made the system PriorityClasses yet.
func notYet(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "no PriorityClass with name")
}

// sync makes the mirror pod of name match its static pod (the kubelet's
// SyncPod mirror handling and its orphaned mirror pod cleanup).
func (s *podSync) sync(ctx context.Context, name string) error {
	// The status manager's own pod, shared: read, never changed, copied
	// only to make a mirror pod of it (status.Shared).
	desired := s.pods.Desired(name)
	s.mu.Lock()
	mirror := s.mirrors[name]
	s.mu.Unlock()
	ns, podName, _ := strings.Cut(name, "/")

	if mirror != nil && desired.IsZero() && !s.pods.Synced() {
		// Maybe not an orphan: the agent may not have published the pod yet.
		time.AfterFunc(time.Second, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.markLocked(name)
		})
		return nil
	}
	hash := desired.Annotation(manifest.AnnotationHash)
	if mirror != nil && mirror.DeletionTimestamp == nil && (desired.IsZero() || mirror.Annotations[AnnotationMirror] != hash) {
		// The kubelet keeps the mirror pod of a static pod that is still
		// terminating, removed or replaced (deleteOrphanedMirrorPods skips
		// it, and the new generation, whose sync replaces the mirror pod,
		// starts only once the old one has stopped): it shows that pod's
		// status until it has stopped, and the next sync replaces it.
		for _, old := range s.pods.Stopping(name) {
			if old.Annotation(manifest.AnnotationHash) == mirror.Annotations[AnnotationMirror] {
				return s.patchStatus(ctx, podName, mirror, old)
			}
		}
	}
	if mirror != nil && (desired.IsZero() || mirror.Annotations[AnnotationMirror] != hash ||
		mirror.DeletionTimestamp != nil) {
		why := "orphaned"
		if !desired.IsZero() {
			why = "outdated"
			if mirror.DeletionTimestamp != nil {
				why = "being deleted"
			}
		}
		if err := s.deleteMirror(ctx, s.client.Pods(ns), mirror); err != nil {
			return err
		}
		s.m.logger.Info("deleted mirror pod", "pod", name, "uid", mirror.UID, "why", why)
		mirror = nil
	}
	if desired.IsZero() {
		return nil
	}
	if mirror == nil {
		created, err := s.create(ctx, s.client.Pods(ns), desired)
		if err != nil {
			return err
		}
		mirror = created
	}
	return s.patchStatus(ctx, podName, mirror, desired)
}

// deleteMirror deletes a mirror pod at once, only if it is still the one
// seen (a UID precondition, the kubelet's DeleteMirrorPod).
//
// A NotFound or Conflict is not taken on trust: the NodeRestriction
// admission plugin answers a node's delete from its informer's cache, which
// an API server that has just started has not filled yet (nor one that lags
// behind a create), so it says NotFound of a pod that is there. The kubelet
// gets away with trusting it because it retries its cleanup of orphans every
// two seconds from its own informer; here the pod would be forgotten, and
// stay on the API server until the watch is listed again. So the pod is
// read back: gone indeed, or an error that retries the sync after its
// back-off.
func (s *podSync) deleteMirror(ctx context.Context, pods podsClient, mirror *v1.Pod) error {
	zero := int64(0)
	err := pods.Delete(ctx, mirror.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &mirror.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete mirror pod (uid %s): %s", mirror.UID, oneLine(err))
	}
	if err != nil {
		cur, gerr := pods.Get(ctx, mirror.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
		case gerr != nil:
			return fmt.Errorf("delete mirror pod (uid %s): %s; read it back: %s", mirror.UID, oneLine(err), oneLine(gerr))
		case cur.UID == mirror.UID:
			return fmt.Errorf("delete mirror pod (uid %s): the API server answered %s, but the pod is still there", mirror.UID, oneLine(err))
		default:
			// Replaced meanwhile: the next sync looks at the new one.
			s.forget(mirror)
			s.see(cur)
			return fmt.Errorf("delete mirror pod (uid %s): replaced meanwhile by uid %s", mirror.UID, cur.UID)
		}
	}
	s.forget(mirror)
	return nil
}

// forget drops a mirror pod from what is known of the API server, so that
// the next sync does not take it for there.
func (s *podSync) forget(mirror *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := mirror.Namespace + "/" + mirror.Name
	if cur := s.mirrors[name]; cur != nil && cur.UID == mirror.UID {
		delete(s.mirrors, name)
	}
	delete(s.patched, string(mirror.UID))
}

type podsClient interface {
	Create(context.Context, *v1.Pod, metav1.CreateOptions) (*v1.Pod, error)
	Get(context.Context, string, metav1.GetOptions) (*v1.Pod, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
	Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*v1.Pod, error)
}

// create makes the mirror pod of static pod p (the kubelet's
// CreateMirrorPod): p with the mirror annotation and one controller
// reference to the Node. An existing pod of the same name and hash is
// taken as made.
func (s *podSync) create(ctx context.Context, pods podsClient, p status.Shared) (*v1.Pod, error) {
	uid, ok := s.m.nodeUID(ctx)
	if !ok {
		return nil, ctx.Err()
	}
	mp := mirrorPod(p, s.m.cfg.NodeName, uid)
	created, err := pods.Create(ctx, mp, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := pods.Get(ctx, mp.Name, metav1.GetOptions{})
		if gerr == nil && existing.Annotations[AnnotationMirror] == mp.Annotations[AnnotationMirror] && existing.Spec.NodeName == s.m.cfg.NodeName {
			s.see(existing)
			return existing, nil
		}
		if gerr == nil && existing.Annotations[AnnotationMirror] != "" && existing.Spec.NodeName == s.m.cfg.NodeName {
			// Ours, outdated: it is deleted at the next sync.
			s.see(existing)
		}
		return nil, fmt.Errorf("create mirror pod: a pod %s/%s exists that is not its mirror pod", mp.Namespace, mp.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("create mirror pod: %s", oneLine(err))
	}
	s.m.logger.Info("created mirror pod", "pod", mp.Namespace+"/"+mp.Name, "uid", created.UID)
	s.see(created)
	return created, nil
}

// mirrorPod is static pod p as its mirror pod, without the node-local
// objects the API server would refuse: made of a copy of p, whose status it
// does not take (patchStatus sets it).
func mirrorPod(p status.Shared, node string, nodeUID types.UID) *v1.Pod {
	mp := p.Copy()
	mp.TypeMeta, mp.Status = metav1.TypeMeta{}, v1.PodStatus{}
	mp.UID, mp.ResourceVersion, mp.DeletionTimestamp, mp.DeletionGracePeriodSeconds = "", "", nil, nil
	if mp.Annotations == nil {
		mp.Annotations = map[string]string{}
	}
	mp.Annotations[AnnotationMirror] = p.Annotation(manifest.AnnotationHash)
	withoutNodeLocalObjects(mp)
	controller := true
	mp.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: nodeUID, Controller: &controller}}
	return mp
}

// patchStatus patches the status of static pod desired onto its mirror pod
// name when it changed since it was last patched there (the kubelet's status
// manager syncPod, with its UID precondition). The very pod last patched
// there costs nothing: not even its status is encoded.
func (s *podSync) patchStatus(ctx context.Context, name string, mirror *v1.Pod, desired status.Shared) error {
	uid := string(mirror.UID)
	s.mu.Lock()
	last, patchedBefore := s.patched[uid]
	s.mu.Unlock()
	// What was patched is what the mirror pod shows only while no one else
	// wrote it since.
	known := patchedBefore && last.rv == mirror.ResourceVersion
	if known && last.pod.Same(desired) {
		return nil
	}
	// The static pod's status as it is: its observedGeneration and its
	// conditions' stay unset, as the kubelet's (they come from the static
	// pod's generation, which a manifest never has), not the mirror pod's.
	js, err := desired.StatusJSON()
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	if known && last.json == string(js) {
		// Another pod with the same status (published again, not changed):
		// kept instead, so that its next sync finds it Same.
		s.mu.Lock()
		if cur, ok := s.patched[uid]; ok && cur.json == last.json && cur.rv == last.rv {
			s.patched[uid] = patched{pod: desired, json: cur.json, rv: cur.rv}
		}
		s.mu.Unlock()
		return nil
	}
	patch, changed, err := statusPatch(mirror, withConditionsOfOthers(js, mirror.Status.Conditions))
	if err != nil {
		return err
	}
	if !changed && patchedBefore {
		// Written since by someone else (or by a patch whose answer was
		// lost), and it shows the status all the same: nothing to send.
		// A mirror pod never patched is patched, changed or not: that
		// tells, by a NotFound, of one taken for there (found made, see)
		// that was deleted as it was found.
		s.keepPatched(mirror, patched{pod: desired, json: string(js), rv: mirror.ResourceVersion})
		return nil
	}
	if !s.statusLimit.TryAccept() {
		full := mirror.Namespace + "/" + name
		time.AfterFunc(jitter(statusDelay), func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.markLocked(full)
		})
		return nil
	}
	updated, err := s.client.Pods(mirror.Namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone or replaced meanwhile: the watch tells, and the next sync makes it again.
		s.forget(mirror)
		return fmt.Errorf("patch mirror pod status (uid %s): %s", mirror.UID, oneLine(err))
	}
	if err != nil {
		return fmt.Errorf("patch mirror pod status (uid %s): %s", mirror.UID, oneLine(err))
	}
	if s.keepPatched(mirror, patched{pod: desired, json: string(js), rv: updated.ResourceVersion}) {
		s.see(updated)
	}
	return nil
}

// keepPatched keeps what was patched onto mirror pod mirror, unless the
// mirror pod is no longer the one known by its name: the watch told it
// deleted (or a relist did not have it) while the patch was under way, and
// what its answer says would bring it back, kept for good, and the next
// syncs would find its status patched instead of making it again.
func (s *podSync) keepPatched(mirror *v1.Pod, p patched) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.mirrors[mirror.Namespace+"/"+mirror.Name]; cur == nil || cur.UID != mirror.UID {
		return false
	}
	s.patched[string(mirror.UID)] = p
	return true
}

// ownConditions are the conditions of a static pod's status that the agent
// makes (the kubelet's PodConditionsByKubelet, with the feature-gated ones,
// and the agent's own): the others on a mirror pod are someone else's.
var ownConditions = []v1.PodConditionType{
	v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady,
	v1.PodResizeInProgress, v1.PodResizePending, v1.PodReadyToStartContainers,
	v1.AllContainersRestarting, agent.ConditionRolledBack,
}

// withConditionsOfOthers is status, JSON, with the conditions of mirror's
// that others own, as the kubelet's mergePodStatus keeps them: a patch that
// leaves them out would remove them. The conditions keep mirror's order
// (the status's in the place of mirror's of their type, its new ones
// after), which a patch would change too. status itself when mirror has
// none of others, or when it cannot be read (the patch then removes them).
func withConditionsOfOthers(status json.RawMessage, mirror []v1.PodCondition) json.RawMessage {
	if !slices.ContainsFunc(mirror, func(c v1.PodCondition) bool { return !slices.Contains(ownConditions, c.Type) }) {
		return status
	}
	var st v1.PodStatus
	if err := json.Unmarshal(status, &st); err != nil {
		return status
	}
	conds := make([]v1.PodCondition, 0, len(mirror)+len(st.Conditions))
	for _, c := range mirror {
		if i := slices.IndexFunc(st.Conditions, func(o v1.PodCondition) bool { return o.Type == c.Type }); i >= 0 {
			conds = append(conds, st.Conditions[i])
		} else if !slices.Contains(ownConditions, c.Type) {
			conds = append(conds, c)
		}
	}
	for _, c := range st.Conditions {
		if !slices.ContainsFunc(conds, func(o v1.PodCondition) bool { return o.Type == c.Type }) {
			conds = append(conds, c)
		}
	}
	st.Conditions = conds
	js, err := json.Marshal(&st)
	if err != nil {
		return status
	}
	return js
}

// statusPatch is the strategic merge patch from mirror's status to the
// status encoded in status, with the mirror's UID as precondition
// (statusutil.PatchPodStatus); changed is false when it changes nothing.
func statusPatch(mirror *v1.Pod, status json.RawMessage) (patch []byte, changed bool, err error) {
	type obj[S any] struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
		Status S `json:"status"`
	}
	var oldObj obj[v1.PodStatus]
	var newObj obj[json.RawMessage]
	oldObj.Metadata.UID, oldObj.Status = mirror.UID, mirror.Status
	newObj.Metadata.UID, newObj.Status = mirror.UID, status
	oldJS, err := json.Marshal(oldObj)
	if err != nil {
		return nil, false, fmt.Errorf("encode status: %w", err)
	}
	newJS, err := json.Marshal(newObj)
	if err != nil {
		return nil, false, fmt.Errorf("encode status: %w", err)
	}
	patch, err = strategicpatch.CreateTwoWayMergePatch(oldJS, newJS, v1.Pod{})
	if err != nil {
		return nil, false, fmt.Errorf("status patch: %w", err)
	}
	// The UID is unchanged, so the diff left it out: put it in as the precondition.
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, false, fmt.Errorf("status patch: %w", err)
	}
	changed = len(m) > 0
	m["metadata"] = map[string]any{"uid": string(mirror.UID)}
	patch, err = json.Marshal(m)
	return patch, changed, err
}

// see records a mirror pod as the API server returned it, unless the watch
// already told a newer one.
func (s *podSync) see(p *v1.Pod) {
	if p == nil || p.Annotations[AnnotationMirror] == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := p.Namespace + "/" + p.Name
	if cur := s.mirrors[name]; cur != nil && cur.UID == p.UID && newerRV(cur.ResourceVersion, p.ResourceVersion) {
		return
	}
	s.mirrors[name] = p
}

// newerRV reports whether a is newer than b; resource versions are opaque
// but etcd's are integers, and an unparsable one is taken as not newer.
func newerRV(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// watchMirrors keeps s.mirrors the API server's mirror pods of this node: a
// list, then a watch from its resourceVersion, and when the watch times out
// another from the last resourceVersion seen (bookmarks keep it recent), as
// the kubelet's reflector does: the node's pods are listed again only after
// an error, or when the rejecter asks. Each change marks the pod's name for
// a sync, which makes a deleted mirror pod again. The node's other pods go
// to the rejecter.
func (s *podSync) watchMirrors(ctx context.Context) {
	bo := newBackoff(200*time.Millisecond, retryMax)
	sel := fields.OneTermEqualSelector("spec.nodeName", s.m.cfg.NodeName).String()
	pods := s.watch.Pods(metav1.NamespaceAll)
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			mirrors, listed, err := s.list(ctx, pods, sel)
			if err != nil {
				if ctx.Err() == nil {
					s.m.report("mirror pod watch", fmt.Errorf("list pods of node %s: %s", s.m.cfg.NodeName, oneLine(err)))
				}
				sleep(ctx, bo.next())
				continue
			}
			s.replace(mirrors)
			rv = listed
		}
		var err error
		rv, err = s.watchFrom(ctx, pods, sel, rv, bo)
		if err != nil && ctx.Err() == nil {
			s.m.report("mirror pod watch", err)
			sleep(ctx, bo.next())
		}
	}
}

// listPageSize bounds what one page of the node's pods holds: the API server
// may bind any number of pods to the node.
const listPageSize = 100

// list lists the node's pods a page at a time, keeping the mirror pods and
// offering the others to the rejecter; it returns the mirror pods and the
// list's resourceVersion.
func (s *podSync) list(ctx context.Context, pods interface {
	List(context.Context, metav1.ListOptions) (*v1.PodList, error)
}, sel string) ([]v1.Pod, string, error) {
	var mirrors []v1.Pod
	opts := metav1.ListOptions{FieldSelector: sel, Limit: listPageSize}
	for {
		lctx, cancel := context.WithTimeout(ctx, requestTimeout)
		page, err := pods.List(lctx, opts)
		cancel()
		if err != nil {
			return nil, "", err
		}
		for i := range page.Items {
			p := &page.Items[i]
			if p.Annotations[AnnotationMirror] != "" {
				mirrors = append(mirrors, *p)
			} else {
				s.rejects.offer(p)
			}
		}
		if page.Continue == "" {
			return mirrors, page.ResourceVersion, nil
		}
		opts.Continue = page.Continue
	}
}

// watchFrom applies watch events until the watch ends, and returns the
// last resourceVersion seen to watch again from, "" to list again first
// (after an error, or when the rejecter asks).
func (s *podSync) watchFrom(ctx context.Context, pods interface {
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}, sel, rv string, bo *backoff) (string, error) {
	// The reflector's: a random timeout, so that nodes started together do
	// not all watch again at once.
	timeout := int64((watchTimeout + rand.N(watchTimeout)) / time.Second)
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, TimeoutSeconds: &timeout, AllowWatchBookmarks: true})
	if err != nil {
		return "", fmt.Errorf("watch pods of node %s: %s", s.m.cfg.NodeName, oneLine(err))
	}
	defer w.Stop()
	s.m.report("mirror pod watch", nil)
	began, events := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return rv, nil
		case <-s.rejects.relist:
			// The rejecter dropped pods: list them again.
			return "", nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, shortWatch(bo, began, events)
			}
			events++
			if ev.Type == watch.Error {
				return "", fmt.Errorf("watch pods of node %s: %s", s.m.cfg.NodeName, oneLine(apierrors.FromObject(ev.Object)))
			}
			// An event, not an error one, says the watch works.
			if events == 1 {
				bo.reset()
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if ev.Type != watch.Bookmark {
				s.apply(ev.Type, p)
			}
		}
	}
}

// replace takes a fresh list of the node's mirror pods.
func (s *podSync) replace(items []v1.Pod) {
	static := s.pods.Keys()
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.mirrors
	s.mirrors = map[string]*v1.Pod{}
	for i := range items {
		p := &items[i]
		name := p.Namespace + "/" + p.Name
		s.mirrors[name] = p
		if o := old[name]; o == nil || o.ResourceVersion != p.ResourceVersion {
			s.markLocked(name)
		}
	}
	for name, p := range old {
		if cur := s.mirrors[name]; cur == nil || cur.UID != p.UID {
			// Gone while the watch did not tell: what was patched onto
			// it goes with it (a mirror pod made again has a new UID).
			delete(s.patched, string(p.UID))
		}
		if s.mirrors[name] == nil {
			s.markLocked(name)
		}
	}
	for _, name := range static {
		if s.mirrors[name] == nil {
			s.markLocked(name)
		}
	}
}

// apply takes one watch event.
func (s *podSync) apply(t watch.EventType, p *v1.Pod) {
	if p.Annotations[AnnotationMirror] == "" {
		if t != watch.Deleted {
			s.rejects.offer(p)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := p.Namespace + "/" + p.Name
	cur := s.mirrors[name]
	switch t {
	case watch.Deleted:
		if cur != nil && cur.UID == p.UID {
			delete(s.mirrors, name)
			delete(s.patched, string(p.UID))
		}
	default:
		if cur != nil && cur.UID == p.UID && newerRV(cur.ResourceVersion, p.ResourceVersion) {
			return
		}
		s.mirrors[name] = p
	}
	s.markLocked(name)
}
