package agent

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/rollout"
	"github.com/staticpodd/staticpodd/agent/source"
)

// rollouts is the agent's side of agent/rollout: each pod name's history,
// read once from disk and written back on every change, the generations
// that run in place of rejected ones, and the histories that could not be
// read (reported as manifest problems until they are written afresh).
type rollouts struct {
	store *rollout.Store // nil: no root dir, nothing is kept

	// The histories are written outside mu: each save is two fsyncs, and
	// mu is taken by every pod's publish (the STATUS line) and start
	// (observe), so a burst of pods waited in line for each other's disk
	// writes. A save is encoded under mu with the next number of saves,
	// and written under wmu unless a later save of the same history was
	// written first.
	wmu     sync.Mutex
	written map[string]uint64 // guarded by wmu: the number of the last save written, by pod full name
	// queued is guarded by wmu: the last save encoded and not yet written,
	// by pod full name. A history read again (its pod was removed and put
	// back) starts from it, not from the disk it has not reached yet.
	queued   map[string]*pendingSave
	inFlight atomic.Int64 // saves encoded and not yet written: written is cleared when none is
	saves    uint64       // guarded by mu: the number of the last save encoded

	mu      sync.Mutex                  // guards the fields below
	byKey   map[string]*rollout.History // by pod full name
	damaged map[string]error            // by pod full name
	// subst is the pod parsed from the target of each rejection in force,
	// by pod full name: parsed once, handed to the worker at each reconcile.
	subst map[string]*v1.Pod
}

func newRollouts(rootDir string) *rollouts {
	r := &rollouts{byKey: map[string]*rollout.History{}, damaged: map[string]error{}, subst: map[string]*v1.Pod{}, written: map[string]uint64{}, queued: map[string]*pendingSave{}}
	if rootDir != "" {
		r.store = rollout.NewStore(rootDir)
	}
	return r
}

// historyLocked is the history of namespace/name, read from disk the first
// time.
func (r *rollouts) historyLocked(namespace, name string) *rollout.History {
	key := namespace + "/" + name
	if h := r.byKey[key]; h != nil {
		return h
	}
	h := &rollout.History{Namespace: namespace, Name: name}
	if r.store != nil {
		r.wmu.Lock()
		p := r.queued[key]
		r.wmu.Unlock()
		var err error
		if p != nil {
			err = rollout.Decode(p.data, h)
		} else {
			h, err = r.store.Load(namespace, name)
		}
		if err != nil {
			r.damaged[key] = err
		}
	}
	r.byKey[key] = h
	return h
}

// saveLocked writes h back; a history that cannot be written stays in
// memory, and the error is the caller's to log.
func (r *rollouts) saveLocked(h *rollout.History) error {
	err := r.write(r.encodeLocked(h))
	if err == nil {
		delete(r.damaged, h.Namespace+"/"+h.Name)
	}
	return err
}

// pendingSave is a history encoded under mu, to be written after it.
type pendingSave struct {
	namespace, name string
	seq             uint64
	data            []byte
	err             error // encoding failed
}

func (p *pendingSave) key() string { return p.namespace + "/" + p.name }

// encodeLocked encodes h for write; nil when nothing is kept.
func (r *rollouts) encodeLocked(h *rollout.History) *pendingSave {
	if r.store == nil {
		return nil
	}
	r.saves++
	r.inFlight.Add(1)
	b, err := rollout.Encode(h)
	p := &pendingSave{namespace: h.Namespace, name: h.Name, seq: r.saves, data: b, err: err}
	if err == nil {
		r.wmu.Lock()
		r.queued[p.key()] = p
		r.wmu.Unlock()
	}
	return p
}

// write writes p unless a later save of its history was written first;
// the caller, holding mu again, forgets the history's damage on success.
func (r *rollouts) write(p *pendingSave) error {
	if p == nil {
		return nil
	}
	r.wmu.Lock()
	err := p.err
	if err == nil && p.seq > r.written[p.key()] {
		err = r.store.Write(p.namespace, p.name, p.data)
		// Failed too: an earlier save still on its way must not land
		// in its place; the next change saves the history again.
		r.written[p.key()] = p.seq
	}
	if r.queued[p.key()] == p {
		delete(r.queued, p.key())
	}
	if r.inFlight.Add(-1) == 0 {
		clear(r.written)
	}
	r.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("keep the rollout history of %s: %w", p.key(), err)
	}
	return nil
}

// writeAll writes saves after mu, returning the errors by pod full name.
func (r *rollouts) writeAll(saves []*pendingSave) map[string]error {
	var errs map[string]error
	var ok []string
	for _, p := range saves {
		if err := r.write(p); err != nil {
			if errs == nil {
				errs = map[string]error{}
			}
			errs[p.key()] = err
		} else if p != nil {
			ok = append(ok, p.key())
		}
	}
	if len(ok) > 0 {
		r.mu.Lock()
		for _, key := range ok {
			delete(r.damaged, key)
		}
		r.mu.Unlock()
	}
	return errs
}

// History is a copy of the history of namespace/name, for `rollout`.
func (r *rollouts) History(namespace, name string) (rollout.History, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.historyLocked(namespace, name)
	c := *h
	c.Generations = append([]rollout.Generation(nil), h.Generations...)
	return c, r.damaged[namespace+"/"+name]
}

// substitute replaces, in pods, each pod whose source offers a generation
// that was rolled back by the generation that runs instead, and returns a
// problem for each such manifest: flagged until its content changes again.
// A history that cannot be read is a problem too.
//
// It returns too the manifests of the generations run instead, for the
// SeenStore to keep with their state as a source's.
func (r *rollouts) substitute(pods map[string]manifest.Pod, nodeName string, seen manifest.SeenFunc) (problems []manifest.Problem, running []source.Manifest) {
	r.mu.Lock()
	problems, running, saves := r.substituteLocked(pods, nodeName, seen)
	r.mu.Unlock()
	for key, err := range r.writeAll(saves) {
		problems = append(problems, manifest.Problem{Origin: pods[key].Origin, Err: err})
	}
	return problems, running
}

// substituteLocked is substitute under mu; the histories to write after it.
func (r *rollouts) substituteLocked(pods map[string]manifest.Pod, nodeName string, seen manifest.SeenFunc) (problems []manifest.Problem, running []source.Manifest, saves []*pendingSave) {
	for key := range r.byKey {
		if _, ok := pods[key]; !ok {
			// Read again from disk if the pod comes back.
			delete(r.byKey, key)
			delete(r.subst, key)
			delete(r.damaged, key)
		}
	}
	for key, p := range pods {
		h := r.historyLocked(p.Namespace, p.Name)
		if err := r.damaged[key]; err != nil {
			problems = append(problems, manifest.Problem{Origin: p.Origin, Err: fmt.Errorf("%w; it starts afresh", err)})
		}
		rej, changed := h.Offered(string(p.UID), content(p.Pod))
		if changed {
			delete(r.subst, key)
			saves = append(saves, r.encodeLocked(h))
		}
		if c := h.Current(); rej == nil && c != nil && c.UID == string(p.UID) && !c.FailedAt.IsZero() {
			problems = append(problems, manifest.Problem{Origin: p.Origin, Err: fmt.Errorf(
				"pod %s generation %s %s; no earlier generation that was Ready is kept: left running", key, c.UID, c.Reason)})
		}
		if rej == nil {
			continue
		}
		pod, err := r.targetLocked(key, h, rej, nodeName, seen)
		if err != nil {
			problems = append(problems, manifest.Problem{Origin: p.Origin, Err: err})
			continue
		}
		problems = append(problems, manifest.Problem{Origin: p.Origin, Err: errors.New("pod " + key + " " + rejectionMessage(h, rej, manifest.FollowTags(p.Pod) > 0))})
		pods[key] = manifest.Pod{Pod: pod, Source: p.Source, Origin: p.Origin}
		if g := h.Find(rej.Target); g != nil {
			running = append(running, source.Manifest{UID: pod.UID, Source: g.Source, Origin: g.Origin, Data: []byte(g.Manifest)})
		}
	}
	return problems, running, saves
}

// rejected is the rejection in force for namespace/name, a copy; nil if
// none.
func (r *rollouts) rejected(namespace, name string) *rollout.Rejected {
	r.mu.Lock()
	defer r.mu.Unlock()
	rej := r.historyLocked(namespace, name).Rejected
	if rej == nil {
		return nil
	}
	c := *rej
	return &c
}

// targetLocked is the pod of the generation that runs in place of rej.
func (r *rollouts) targetLocked(key string, h *rollout.History, rej *rollout.Rejected, nodeName string, seen manifest.SeenFunc) (*v1.Pod, error) {
	if pod := r.subst[key]; pod != nil && string(pod.UID) == rej.Target {
		return pod, nil
	}
	g := h.Find(rej.Target)
	if g == nil || g.Manifest == "" {
		return nil, fmt.Errorf("pod %s cannot be rolled back: the manifest of generation %s is not kept", key, rej.Target)
	}
	parsed := manifest.Check([]byte(g.Manifest), g.Source, g.Origin, nodeName)
	if err := parsed.Err(); err != nil || len(parsed.Pods) != 1 {
		return nil, fmt.Errorf("pod %s cannot be rolled back to generation %s: its kept manifest is no longer valid: %v", key, rej.Target, err)
	}
	pod := parsed.Pods[0]
	// The generation's UID as it ran: a restart mixes more than the
	// manifest into it.
	pod.UID = types.UID(g.UID)
	pod.Annotations[manifest.AnnotationHash] = g.UID
	runDigests(pod.Pod, g.Images)
	manifest.Stamp(pod, seen)
	r.subst[key] = pod.Pod
	return pod.Pod, nil
}

// keptImages are the images the kept generations of the pods ran.
func (r *rollouts) keptImages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, h := range r.byKey {
		for _, g := range h.Generations {
			for _, id := range g.Images {
				out = append(out, id)
			}
		}
	}
	return out
}

// content is what pod runs, for a rollback to hold on (rollout.Rejected):
// its manifest's content and its containers' images (a followed tag's
// digest is not in the manifest), without the salts of staticpodd restart
// and restart-on-change files.
func content(pod *v1.Pod) string {
	h := md5.New()
	fmt.Fprintf(h, "manifest:%s\n", manifest.ManifestUID(pod))
	for _, c := range manifest.AllContainers(pod) {
		fmt.Fprintf(h, "image:%s=%s\n", c.Name, c.Image)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// runDigests makes the containers of pod, if it follows its tags, run the
// digests its generation ran (images, by container), which the tags may
// no longer name: a generation brought back is the one that was Ready.
func runDigests(pod *v1.Pod, images map[string]string) {
	if manifest.FollowTags(pod) == 0 {
		return
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if d := images[cs[i].Name]; byTag(cs[i].Image) && sameRepo(cs[i].Image, d) {
				cs[i].Image = d
			}
		}
	}
}

// observe records where the current generation of w's pod is, from its
// published status: started, Ready, or past its rollback-after, when it is
// rolled back or left running. It returns when the generation's deadline
// passes, zero if none is pending, and whether it failed: the reconcile
// loop must merge again, to run the target and flag the file.
func (r *rollouts) observe(w *worker, pod, published *v1.Pod, now time.Time) (time.Time, bool) {
	r.mu.Lock()
	dl, rolled, save := r.observeLocked(w, pod, published, now)
	r.mu.Unlock()
	if errs := r.writeAll([]*pendingSave{save}); len(errs) > 0 {
		for _, err := range errs {
			w.logger.Warn("rollout history not kept", "err", err)
		}
	}
	return dl, rolled
}

// observeLocked is observe under mu; the history to write after it, if
// it changed.
func (r *rollouts) observeLocked(w *worker, pod, published *v1.Pod, now time.Time) (time.Time, bool, *pendingSave) {
	h := r.historyLocked(pod.Namespace, pod.Name)
	uid := string(pod.UID)
	var changed bool
	if c := h.Current(); c == nil || c.UID != uid {
		g := rollout.Generation{UID: uid, Source: pod.Annotations[manifest.AnnotationSource], Content: content(pod)}
		src := w.a.sourceOf(uid)
		if src == nil {
			// A generation manifest.Regenerate made (a restart, a
			// followed tag) is of the manifest its source offered.
			src = w.a.sourceOf(manifest.ManifestUID(pod))
		}
		if src != nil {
			g.Origin, g.Manifest = src.Origin, string(src.Data)
		} else if old := h.Find(uid); old != nil {
			g.Origin, g.Manifest, g.Source = old.Origin, old.Manifest, old.Source
		}
		if old := h.Find(uid); old != nil && old.Content != "" {
			g.Content = old.Content // a run of it again, brought back
		}
		if h.Rejected != nil && h.Rejected.Target == uid {
			g.RollbackOf = h.Rejected.UID
		}
		changed = h.Start(g, now)
	}
	if h.AwaitsReady(uid) && podReady(published) {
		// The image IDs only then: every sync of a Ready pod came by.
		changed = h.Ready(uid, now, imageIDs(published)) || changed
	}
	var rolled bool
	d := manifest.RollbackAfter(pod)
	dl := h.Deadline(uid, d)
	if c := h.Current(); !dl.IsZero() && c.StartedAt.Before(w.a.started) {
		// Started before this agent: its deadline may have passed while no
		// daemon ran (stopped, killed, the node rebooted), and its probes
		// have not answered this agent yet. It is judged rollback-after
		// past the agent's start at the earliest: not Ready then, it
		// never would have been.
		dl = later(dl, w.a.started.Add(d))
	}
	switch {
	case dl.IsZero() || now.Before(dl):
	case podReady(published) && !readySince(published).After(now.Add(-rollout.Settle(d))):
		changed, dl = h.Pass(uid, now) || changed, time.Time{}
	default:
		reason := fmt.Sprintf("not Ready within %s: %s", d, w.notReadyReason(published))
		target := h.Target()
		by := ""
		if target != nil {
			by = rollout.ByDeadline
		}
		h.Fail(uid, now, reason, imageIDs(published), by, target)
		changed, rolled, dl = true, true, time.Time{}
		w.rolledBack(pod, h, target, reason)
	}
	if !changed {
		return dl, rolled, nil
	}
	return dl, rolled, r.encodeLocked(h)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// undo rolls namespace/name back to its previous Ready generation, at the
// operator's request, and returns a copy of it.
func (r *rollouts) undo(namespace, name string, now time.Time) (*rollout.Generation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.historyLocked(namespace, name)
	t, err := h.Undo(now)
	if err != nil {
		return nil, err
	}
	g := *t
	return &g, r.saveLocked(h)
}

// rejectionMessage says why the generation rej.Target of h runs in place of
// the one its source offers.
func rejectionMessage(h *rollout.History, rej *rollout.Rejected, follows bool) string {
	again := "the file is used again once its content changes"
	if follows {
		again += ", or a followed tag names yet another digest"
	}
	msg := fmt.Sprintf("rolled back (%s) to generation %s: %s; %s", rej.By, rej.Target, rej.Reason, again)
	if c := h.Current(); c != nil && c.UID == rej.Target && !c.FailedAt.IsZero() {
		msg += fmt.Sprintf("; generation %s, brought back, %s too: left running (a rollback never loops)", c.UID, c.Reason)
	}
	return msg
}

// ConditionRolledBack is the pod condition of a generation that runs in
// place of one rolled back: a custom condition type with the project's
// domain, as readiness gates' are, so that the pod's status and its mirror
// pod (kubectl describe, -o jsonpath) say it, not only its events.
const ConditionRolledBack v1.PodConditionType = "staticpodd.io/RolledBack"

// maxConditionMessage bounds the condition's message: the reason in it
// comes from probe output and exit codes, which the pod controls.
const maxConditionMessage = rollout.MaxReason

// condition is the RolledBack condition of the pod key: set while its
// generation runs in place of a generation its source still offers, nil otherwise.
// It lifts with the rejection, when the source's content changes again.
func (r *rollouts) condition(key string, pod *v1.Pod) *v1.PodCondition {
	uid := pod.UID
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.byKey[key]
	if h == nil || h.Rejected == nil || h.Rejected.Target != string(uid) {
		return nil
	}
	c := &v1.PodCondition{Type: ConditionRolledBack, Status: v1.ConditionTrue, Reason: events.RolledBack,
		Message: rollout.OneLine(rollout.Bound(rejectionMessage(h, h.Rejected, manifest.FollowTags(pod) > 0), maxConditionMessage))}
	// The transition is when the rollback began: the run it started, kept
	// on disk, so the time stays the same across daemon restarts.
	if g := h.Current(); g != nil && g.UID == string(uid) && g.RollbackOf == h.Rejected.UID {
		c.LastTransitionTime = metav1.NewTime(g.StartedAt)
	} else if g := h.Find(h.Rejected.UID); g != nil {
		c.LastTransitionTime = metav1.NewTime(g.FailedAt)
	}
	return c
}

// rolledBack says that the generation of pod was not Ready in time: rolled
// back to target, or left running when there is none.
func (w *worker) rolledBack(pod *v1.Pod, h *rollout.History, target *rollout.Generation, reason string) {
	c := h.Current()
	var msg string
	switch {
	case target != nil:
		msg = fmt.Sprintf("Generation %s %s; rolling back to generation %s", pod.UID, reason, target.UID)
	case c != nil && c.RollbackOf != "":
		msg = fmt.Sprintf("Generation %s, brought back by a rollback, %s too; left running (a rollback never loops)", pod.UID, reason)
	default:
		msg = fmt.Sprintf("Generation %s %s; no earlier generation that was Ready is kept, left running", pod.UID, reason)
	}
	w.logger.Warn("rollout failed", "uid", pod.UID, "reason", reason, "rolledBack", target != nil)
	w.a.events.Eventf(rolloutRef(pod, target), v1.EventTypeWarning, events.RolledBack, "%s", msg)
}

// rolloutRef is what a RolledBack event is about: the pod as it runs
// after, the generation rolled back to (target), so that describe and the
// mirror pod of that generation show why it runs.
func rolloutRef(pod *v1.Pod, target *rollout.Generation) v1.ObjectReference {
	ref := events.PodRef(pod)
	if target != nil {
		ref.UID = types.UID(target.UID)
	}
	return ref
}

// notReadyReason says why pod is not Ready: a container's waiting reason,
// last exit or failing probe's output, cut to rollout.MaxReason.
func (w *worker) notReadyReason(pod *v1.Pod) string {
	var why []string
	for _, cs := range append(append([]v1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		var s []string
		switch {
		case cs.State.Waiting != nil:
			s = append(s, cs.State.Waiting.Reason)
			if cs.State.Waiting.Message != "" && cs.LastTerminationState.Terminated == nil {
				s = append(s, cs.State.Waiting.Message)
			}
		case cs.State.Terminated != nil:
			s = append(s, fmt.Sprintf("exited with code %d (%s)", cs.State.Terminated.ExitCode, cs.State.Terminated.Reason))
		case !cs.Ready:
			s = append(s, "not ready")
		}
		if t := cs.LastTerminationState.Terminated; t != nil && cs.RestartCount > 0 {
			s = append(s, fmt.Sprintf("restarted %d times, last exit code %d (%s)", cs.RestartCount, t.ExitCode, t.Reason))
		}
		if len(s) > 0 {
			why = append(why, "container "+cs.Name+" "+strings.Join(s, ", "))
		}
	}
	for _, ps := range w.probeStatuses() {
		if ps.Result != "success" && ps.Result != "" {
			why = append(why, fmt.Sprintf("%s probe of %s: %s %s", ps.Probe, ps.Container, ps.Result, strings.TrimSpace(ps.Output)))
		}
	}
	if len(why) == 0 {
		return "not Ready"
	}
	return rollout.Bound(strings.Join(why, "; "), rollout.MaxReason)
}

// imageIDs are the image IDs of pod's containers, by container name.
func imageIDs(pod *v1.Pod) map[string]string {
	out := map[string]string{}
	for _, cs := range append(append([]v1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.ImageID != "" {
			out[cs.Name] = cs.ImageID
		}
	}
	return out
}

// podReady says whether pod's Ready condition is True, or it ran to
// completion (a pod of restartPolicy Never or OnFailure).
func podReady(pod *v1.Pod) bool {
	if pod.Status.Phase == v1.PodSucceeded {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// readySince is when pod's Ready condition last became True; zero if it
// is not, or the pod ran to completion.
func readySince(pod *v1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// offeredManifest is the manifest a source offered for the pod uid, nil if
// none did.
func (s *SeenStore) offeredManifest(uid types.UID) *source.Manifest {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, set := range s.offered {
		if m, ok := set[uid]; ok {
			return &m
		}
	}
	return nil
}

// sourceOf is the manifest pod uid was made from, nil if it is not known.
func (a *Agent) sourceOf(uid string) *source.Manifest {
	if a.cfg.Seen == nil {
		return nil
	}
	return a.cfg.Seen.offeredManifest(types.UID(uid))
}

// substituteRollbacks is reconcile's: each pod whose generation was rolled
// back runs its target instead (rollouts.substitute).
func (a *Agent) substituteRollbacks(pods map[string]manifest.Pod) []manifest.Problem {
	if a.cfg.Seen == nil {
		problems, _ := a.rollouts.substitute(pods, a.cfg.NodeName, nil)
		return problems
	}
	problems, running := a.rollouts.substitute(pods, a.cfg.NodeName, a.cfg.Seen.Seen)
	// Kept with the pod's state as any source's manifest: `ps` with the
	// daemon down, and the last good pod of a file unusable at start.
	a.cfg.Seen.Offer(rolledBackSource, running)
	return problems
}

// rolledBackSource is what the SeenStore is offered the manifests of the
// generations that run in place of rolled back ones as: they are kept with
// the source and origin they came from.
const rolledBackSource = "rollback"

// wakeReconcile makes the reconcile loop merge the sources again.
func (a *Agent) wakeReconcile() {
	select {
	case a.rerun <- struct{}{}:
	default:
	}
}

// checkRollout records where the desired generation of the worker is in its
// rollout, once no older generation runs any more, and rolls it back when
// it is past its rollback-after; it returns when that deadline passes.
func (w *worker) checkRollout(pod *v1.Pod) time.Time {
	if pod == nil || w.gen == nil || w.gen.uid != string(pod.UID) || w.gen.state() != podSyncing {
		return time.Time{}
	}
	for uid := range w.pods {
		if uid != w.gen.uid {
			return time.Time{} // an older generation still stops: this one has not started
		}
	}
	if w.waitsForDependencies() {
		return time.Time{} // its clock starts when it may start (start-after)
	}
	published := w.a.statuses.Desired(w.key)
	if published == nil || published.UID != pod.UID {
		return time.Time{}
	}
	dl, rolled := w.a.rollouts.observe(w, pod, published, time.Now())
	if rolled {
		w.a.wakeReconcile()
	}
	return dl
}

// line is what STATUS= says of rollouts: the pods rolled back, or whose
// rollback failed too.
func (r *rollouts) line() string {
	names := r.troubled()
	switch {
	case len(names) == 0:
		return ""
	case len(names) > 3:
		names = append(names[:3], fmt.Sprintf("%d more", len(names)-3))
	}
	return "rolled back: " + strings.Join(names, ", ")
}

// troubled are the pods rolled back, by full name, sorted.
func (r *rollouts) troubled() []string {
	var out []string
	for _, t := range r.trouble() {
		out = append(out, t.key)
	}
	return out
}

type rolloutTrouble struct {
	key   string
	since time.Time
	msg   string
}

// trouble is, for each pod whose current generation was rolled back or
// failed its rollout, since when and why, sorted by full name.
func (r *rollouts) trouble() []rolloutTrouble {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []rolloutTrouble
	for key, h := range r.byKey {
		// Without a rejection or a failure there is nothing to say: cheap
		// for the many pods, as the STATUS= line is made often.
		if c := h.Current(); h.Rejected == nil && (c == nil || c.FailedAt.IsZero()) {
			continue
		}
		st := h.Status(0)
		if !st.Failed() {
			continue
		}
		since := h.Current().FailedAt
		if g := h.Find(h.Current().RollbackOf); g != nil && since.IsZero() {
			since = g.FailedAt
		}
		out = append(out, rolloutTrouble{key: key, since: since, msg: st.Message})
	}
	slices.SortFunc(out, func(a, b rolloutTrouble) int { return strings.Compare(a.key, b.key) })
	return out
}

// RolloutTrouble is, for /healthz?verbose, each pod rolled back or whose
// rollout failed, joined; nil when there is none, and since when the first
// began. A rollback never makes the daemon unhealthy: it keeps a pod running.
func (a *Agent) RolloutTrouble() (error, time.Time) {
	var errs []error
	var since time.Time
	for _, t := range a.rollouts.trouble() {
		errs = append(errs, fmt.Errorf("pod %s: %s", t.key, t.msg))
		if since.IsZero() || (!t.since.IsZero() && t.since.Before(since)) {
			since = t.since
		}
	}
	return errors.Join(errs...), since
}

// Rollout is the rollout history of the pod namespace/name, and the error
// of a history found damaged (it started afresh).
func (a *Agent) Rollout(namespace, name string) (rollout.History, error) {
	return a.rollouts.History(namespace, name)
}

// RolloutNames are the pods that have a rollout history on disk.
func (a *Agent) RolloutNames() ([]string, error) {
	if a.rollouts.store == nil {
		return nil, nil
	}
	return a.rollouts.store.Names()
}

// RollbackAfter is the rollback-after of the desired pod namespace/name.
func (a *Agent) RollbackAfter(namespace, name string) time.Duration {
	if p := a.statuses.Desired(namespace + "/" + name); p != nil {
		return manifest.RollbackAfter(p)
	}
	return 0
}

// Undo rolls the pod namespace/name back to its previous Ready generation,
// at the operator's request: it runs until the manifest's content changes.
func (a *Agent) Undo(namespace, name string) (*rollout.Generation, error) {
	key := namespace + "/" + name
	a.mu.Lock()
	_, known := a.workers[key]
	a.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("no pod %s", key)
	}
	t, err := a.rollouts.undo(namespace, name, time.Now())
	if err != nil {
		return nil, err
	}
	if p := a.statuses.Desired(key); p != nil {
		a.events.Eventf(rolloutRef(p, t), v1.EventTypeWarning, events.RolledBack,
			"Generation %s undone by the operator; rolling back to generation %s", p.UID, t.UID)
	}
	a.wakeReconcile()
	return t, nil
}

// pruneRollouts removes, once at start with the leftover pod directories,
// the histories of pods no source has any more: the histories stay bounded
// by the pods the node runs. A pod removed while the daemon runs keeps its
// history until the next start, so that putting its manifest back brings
// its rollouts back too.
func (a *Agent) pruneRollouts(sources map[string]source.Update) {
	if a.rollouts.store == nil {
		return
	}
	names, err := a.rollouts.store.Names()
	if err != nil {
		a.logger.Warn("rollout histories not listed", "err", err)
	}
	keep := map[string]bool{}
	for _, u := range sources {
		for _, p := range u.Pods {
			if p.Pod != nil {
				keep[fullName(p)] = true
			}
		}
	}
	for _, n := range names {
		if keep[n] {
			continue
		}
		ns, name, _ := strings.Cut(n, "/")
		if err := a.rollouts.store.Remove(ns, name); err != nil {
			a.logger.Warn("rollout history of a pod no source has not removed", "pod", n, "err", err)
		}
	}
}
