package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/images"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// TagResolver asks a registry which digest an image's tag names now.
type TagResolver interface {
	// Resolve returns the repo digest (repository@sha256:...) tag image
	// names at its registry. It returns within a bounded time.
	Resolve(ctx context.Context, image string) (string, error)
}

// followFile, in the root dir, holds the digests followed tags moved to.
const followFile = "follow.json"

// followed is what a pod that follows its tags runs, by container name.
type followed struct {
	// Base is the digest the container ran when its tag was first
	// resolved: the generation its manifest makes, not mixed into the UID.
	Base map[string]string `json:"base"`
	// Now is the digest the tag named when last resolved: a Now that is
	// not Base is run by digest, as a generation of its own.
	Now map[string]string `json:"now"`
	// Tag is the image by tag Base and Now are of: an edit to another tag
	// follows that one afresh.
	Tag map[string]string `json:"tag"`
}

// follows are the digests of followed tags (manifest.AnnotationFollowTags)
// by pod full name, on disk with atomicfile so that a daemon that restarts,
// or a power cut, neither rolls a pod out again nor forgets the digest it
// moved to. A digest a rollback turned away stays Now: its generation is
// the one rolled back, so it is not run again until the tag moves on.
type follows struct {
	path string // "" keeps them in memory only

	mu sync.Mutex // guards the fields below
	at map[string]*followed
	// tags are the pods that follow tags, as the last reconcile merged
	// them: their interval and each container's image by tag.
	tags map[string]followedPod
	wake chan struct{}
}

type followedPod struct {
	every time.Duration
	tags  map[string]string // container name -> image by tag
}

func loadFollows(rootDir string, logger *slog.Logger) *follows {
	f := &follows{at: map[string]*followed{}, tags: map[string]followedPod{}, wake: make(chan struct{}, 1)}
	if rootDir == "" {
		return f
	}
	f.path = filepath.Join(rootDir, followFile)
	b, err := atomicfile.Read(f.path, maxFollowFile)
	if err == nil {
		err = json.Unmarshal(b, &f.at)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		logger.Warn("followed tag digests unreadable; followed pods run their manifests' images", "file", f.path, "err", err)
		f.at = map[string]*followed{}
	}
	for k, e := range f.at {
		if e == nil || e.Base == nil || e.Now == nil || e.Tag == nil {
			delete(f.at, k)
		}
	}
	return f
}

// maxFollowFile bounds follow.json: three digests of at most a few hundred
// bytes for each container that follows a tag, for thousands of pods.
const maxFollowFile = 8 << 20

func (f *follows) saveLocked() error {
	if f.path == "" {
		return nil
	}
	b, err := json.Marshal(f.at)
	if err == nil && len(b) > maxFollowFile {
		// Kept, the next daemon would refuse it whole.
		err = fmt.Errorf("%d bytes, more than %d", len(b), maxFollowFile)
	}
	if err == nil {
		err = atomicfile.Write(f.path, b)
	}
	if err != nil {
		return fmt.Errorf("save followed tag digests: %w", err)
	}
	return nil
}

// byTag tells whether image names a tag, not a digest.
func byTag(image string) bool { return !strings.Contains(image, "@") }

// apply makes each pod that follows its tags the generation of the
// digests its tags moved to: those containers run by digest, and the
// digests join the pod's UID (manifest.Regenerate). With complete, the
// digests of names no longer in pods are forgotten.
func (f *follows) apply(pods map[string]manifest.Pod, complete bool, logger *slog.Logger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tags := map[string]followedPod{}
	for key, p := range pods {
		every := manifest.FollowTags(p.Pod)
		if every == 0 {
			continue
		}
		fp := followedPod{every: every, tags: map[string]string{}}
		for _, c := range manifest.AllContainers(p.Pod) {
			if byTag(c.Image) {
				fp.tags[c.Name] = c.Image
			}
		}
		if len(fp.tags) == 0 {
			continue
		}
		tags[key] = fp
		e := f.at[key]
		if e == nil {
			continue
		}
		moved := map[string]string{}
		for n, img := range fp.tags {
			if d := e.Now[n]; d != "" && d != e.Base[n] && e.Tag[n] == img && sameRepo(img, d) {
				moved[n] = d
			}
		}
		if len(moved) == 0 {
			continue
		}
		p = manifest.Regenerate(p, manifest.FollowSalt(moved, slices.Sorted(maps.Keys(moved))), nil)
		for _, cs := range [][]v1.Container{p.Pod.Spec.InitContainers, p.Pod.Spec.Containers} {
			for i := range cs {
				if d := moved[cs[i].Name]; d != "" {
					cs[i].Image = d
				}
			}
		}
		pods[key] = p
	}
	f.tags = tags
	select {
	case f.wake <- struct{}{}:
	default:
	}
	if !complete {
		return
	}
	forgot := false
	for key := range f.at {
		if _, ok := tags[key]; !ok {
			delete(f.at, key)
			forgot = true
		}
	}
	if forgot {
		if err := f.saveLocked(); err != nil {
			logger.Warn("forget the followed tag digests of removed pods", "err", err)
		}
	}
}

// statusImage is the image container n of pod's published status was
// started from.
func statusImage(pod *v1.Pod, n string) string {
	for _, cs := range append(append([]v1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.Name == n {
			return cs.Image
		}
	}
	return ""
}

// sameRepo tells whether repo digest d is of the repository of image ref.
func sameRepo(ref, d string) bool {
	n, err := podspec.NormalizeImage(ref)
	if err != nil {
		return false
	}
	repo := n
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return strings.HasPrefix(d, repo+"@")
}

// followRetry is how soon a pod's tags are asked again when nothing of it
// ran yet to compare them with.
const followRetry = 2 * time.Second

// runFollow asks the registry for the digest of each followed tag at its
// pod's interval, first as soon as the pod runs. Each pod's check runs
// apart, so that a registry that hangs holds back its own pods only, and
// the resolver and the pull bound each request.
func (a *Agent) runFollow(ctx context.Context) {
	if a.cfg.Tags == nil {
		return
	}
	type result struct {
		key   string
		retry bool
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	next := map[string]time.Time{}
	busy := map[string]bool{}
	done := make(chan result)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		a.follow.mu.Lock()
		pods := maps.Clone(a.follow.tags)
		a.follow.mu.Unlock()
		now := time.Now()
		wait := time.Hour
		for key := range next {
			if _, ok := pods[key]; !ok {
				delete(next, key)
			}
		}
		for key, fp := range pods {
			due, ok := next[key]
			if !ok || due.After(now.Add(fp.every)) {
				due = now // new, or its interval was shortened
			}
			if busy[key] {
				continue
			}
			if !now.Before(due) {
				busy[key] = true
				due = now.Add(fp.every)
				wg.Go(func() {
					retry := !a.checkTags(ctx, key, fp)
					select {
					case done <- result{key, retry}:
					case <-ctx.Done():
					}
				})
			}
			next[key] = due
			wait = min(wait, due.Sub(now))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case r := <-done:
			delete(busy, r.key)
			if r.retry {
				next[r.key] = time.Now().Add(followRetry)
			}
		case <-a.follow.wake:
		case <-timer.C:
		}
	}
}

// checkTags resolves the tags of pod key once. A tag that names another
// digest than the pod runs has it pulled, then recorded: the next
// reconcile makes it a new generation. It returns false when a container
// has yet to run, so there is no digest to compare with.
func (a *Agent) checkTags(ctx context.Context, key string, fp followedPod) bool {
	pod := a.statuses.Desired(key)
	if pod == nil {
		return false
	}
	running := imageIDs(pod)
	a.follow.mu.Lock()
	base, now, tags := map[string]string{}, map[string]string{}, map[string]string{}
	if e := a.follow.at[key]; e != nil {
		base, now, tags = maps.Clone(e.Base), maps.Clone(e.Now), maps.Clone(e.Tag)
	}
	a.follow.mu.Unlock()
	complete := true
	var moved [][4]string // container, tag, digest, digest before
	// Each tag is asked, and each digest pulled, once per check, however
	// many containers name it: a manifest's count of containers does not
	// multiply the registry's requests, nor the events of its errors.
	type answer struct {
		digest string
		err    error
	}
	asked := map[string]answer{} // by tag
	pulled := map[string]error{} // by digest
	for _, n := range slices.Sorted(maps.Keys(fp.tags)) {
		tag := fp.tags[n]
		if base[n] == "" || tags[n] != tag {
			// First seen, or the manifest names another tag now: what the
			// generation of that tag runs is where it is followed from. An
			// image with no digest of its repository (imported) has its
			// image ID, and the registry's digest is new to it.
			r := running[n]
			if r == "" || statusImage(pod, n) != tag {
				complete = false // not started yet, or the generation before
				continue
			}
			base[n], now[n], tags[n] = r, r, tag
		}
		ans, done := asked[tag]
		if !done {
			ans.digest, ans.err = a.cfg.Tags.Resolve(ctx, tag)
			if ans.err != nil {
				a.logger.Warn("followed tag not resolved", "pod", key, "container", n, "image", tag, "err", ans.err)
				a.events.Eventf(events.PodRef(pod), v1.EventTypeWarning, events.Failed, "Following tag %s: %v", tag, ans.err)
			}
			asked[tag] = ans
		}
		d := ans.digest
		if ans.err != nil || d == now[n] {
			continue
		}
		if _, done := pulled[d]; a.cfg.Images != nil && !done {
			// Judged as the tag the pod names, which a signature for
			// another tag of the repository does not pass.
			_, err := a.cfg.Images.Pull(ctx, d, images.PullOptions{As: tag})
			if err != nil {
				a.logger.Warn("new digest of followed tag not pulled", "pod", key, "container", n, "image", tag, "digest", d, "err", err)
				a.events.Eventf(events.PodRef(pod), v1.EventTypeWarning, events.Failed, "Following tag %s: new digest %s not pulled: %v", tag, d, err)
			}
			pulled[d] = err
		}
		if pulled[d] != nil {
			continue
		}
		moved = append(moved, [4]string{n, tag, d, now[n]})
		now[n] = d
	}
	a.follow.mu.Lock()
	defer a.follow.mu.Unlock()
	if _, ok := a.follow.tags[key]; !ok {
		return true // removed meanwhile
	}
	prev, had := a.follow.at[key]
	if had && maps.Equal(prev.Base, base) && maps.Equal(prev.Now, now) && maps.Equal(prev.Tag, tags) {
		return complete
	}
	a.follow.at[key] = &followed{Base: base, Now: now, Tag: tags}
	if err := a.follow.saveLocked(); err != nil {
		// A generation the disk does not keep would be rolled out again,
		// or forgotten, by the next daemon: try again at the next check.
		a.logger.Warn("followed tag digests not kept", "pod", key, "err", err)
		if had {
			a.follow.at[key] = prev
		} else {
			delete(a.follow.at, key)
		}
		return complete
	}
	// Told once kept: a daemon killed before would resolve it again.
	for _, m := range moved {
		a.logger.Info("followed tag moved: a new generation", "pod", key, "container", m[0], "image", m[1], "digest", m[2], "was", m[3])
		a.events.Eventf(events.PodRef(pod), v1.EventTypeNormal, events.Pulled, "Following tag %s: new digest %s", m[1], m[2])
	}
	if len(moved) > 0 {
		select {
		case a.regenerate <- struct{}{}:
		default:
		}
	}
	return complete
}
