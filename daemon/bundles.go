package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/rollout"
	"github.com/staticpodd/staticpodd/agent/source"
	"github.com/staticpodd/staticpodd/agent/status"
	"github.com/staticpodd/staticpodd/oci/bundle"
	"github.com/staticpodd/staticpodd/oci/image"
)

// newBundleSource is the source of the bundle the node runs
// (<root-dir>/bundles, written by `staticpodd bundle apply` and by the URL
// source): its pods, as one set, and each set sent to the trial. A reload
// leaves it as it is: what it reads is the root dir's, and its relist
// period (the start's fileCheckFrequency) only backs up inotify.
func (d *System) newBundleSource(cfg *config.Config) *source.Running {
	root := cfg.RootDir
	b := source.NewBundle(source.BundleConfig{
		Dir:         bundle.Dir(root),
		Current:     func() (source.BundleSet, error) { return currentBundle(root) },
		NodeName:    cfg.NodeName,
		Period:      cfg.FileCheckFrequency,
		Seen:        d.seen.Seen,
		Logger:      d.logger.With("source", "bundle"),
		Store:       d.seen,
		Credentials: cfg.CredentialsDirectory,
		Sent:        d.trial.sent,
	})
	return &source.Running{Key: root, Run: b.Run, Relist: b.Relist}
}

// currentBundle is the bundle state.json says runs, with its record's name.
func currentBundle(rootDir string) (source.BundleSet, error) {
	st, err := bundle.ReadState(rootDir)
	if err != nil || st.Current == "" {
		return source.BundleSet{}, err
	}
	rec, err := bundle.ReadRecord(rootDir, st.Current)
	if err != nil {
		return source.BundleSet{}, fmt.Errorf("bundle %s: %w", st.Current, err)
	}
	return source.BundleSet{ID: st.Current, Name: rec.Name, Dir: bundle.ManifestsDir(rootDir, st.Current)}, nil
}

// urlBundleRollbackAfter is the rollback-after of a bundle a manifest URL
// serves: the URL says nothing of it, and a bundle that breaks the node
// must not stay.
const urlBundleRollbackAfter = 5 * time.Minute

// urlBundleTimeout bounds the download of a bundle a manifest URL serves,
// from its first bytes: its images make it far larger than a manifest.
const urlBundleTimeout = 30 * time.Minute

// urlBundle is how the URL source of cfg applies a bundle its URL serves:
// staged in the URL's own directory, applied as `staticpodd bundle apply
// URL` does, under the image policy, its manifests checked as the bundle
// source reads them and their images in the bundle (CheckBundle). None for run --once, which runs no bundle.
func (d *System) urlBundle(cfg *config.Config, once bool) *source.URLBundle {
	if once || d.trial == nil {
		return nil
	}
	dir := filepath.Dir(urlSaveFile(cfg))
	rootDir, node, origin := cfg.RootDir, cfg.NodeName, source.Redact(cfg.StaticPodURL)
	return &source.URLBundle{
		Stage: source.BundleStage{Dir: dir, MaxBytes: bundle.DefaultMaxBytes, Timeout: urlBundleTimeout,
			Room: stageRoom(dir, 100-int(cfg.ImageGCHighThresholdPercent))},
		Apply: func(ctx context.Context, path string) error {
			// Read from the staged file, not fetched again: what was
			// fetched is what is verified. As a URL's, the signature's
			// policy scope is "" (oci-archive).
			_, err := bundle.Apply(ctx, d.images, d.images.Policy(), origin, rootDir, bundle.ApplyOptions{
				RollbackAfter: urlBundleRollbackAfter,
				MaxBytes:      bundle.DefaultMaxBytes,
				Client:        &http.Client{Transport: stagedBody(path)},
				Check: func(md bundle.Metadata, files map[string][]byte) error {
					if err := source.CheckBundle(md.Name, files, node); err != nil {
						return err
					}
					return CheckBundle(md, files)
				},
			})
			return err
		},
	}
}

// stageRoom is what the filesystem of dir can take now and keep percent
// of itself free, the reserve an image import leaves (ImageReserve): a
// bundle staged there is refused past it.
func stageRoom(dir string, percent int) func() (int64, error) {
	return func() (int64, error) {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		free, size := uint64(st.Bavail)*uint64(st.Bsize), uint64(st.Blocks)*uint64(st.Bsize)
		reserve := size / 100 * uint64(min(max(percent, 0), 100))
		if free <= reserve {
			return 0, nil
		}
		return int64(min(free-reserve, math.MaxInt64)), nil
	}
}

// stagedBody answers every request with the file at its path: a bundle
// staged by the URL source, handed to bundle.Apply as its URL's body.
type stagedBody string

func (p stagedBody) RoundTrip(req *http.Request) (*http.Response, error) {
	f, err := os.Open(string(p))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &http.Response{Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: f, ContentLength: fi.Size(), Request: req}, nil
}

// bundleTrial judges the bundle on trial (state.json's Trial): once every
// pod the bundle source sent for it has been Ready for rollout.Settle of
// its rollback-after, the bundle is kept (Trial cleared) and the one it
// replaced released (its images unpinned, its record removed); not by its
// deadline, Trial plus rollback-after, the bundle it replaced runs again,
// the failed one is recorded (RolledBack) and released, with a Warning
// event. A bundle applied without a rollback-after is kept at once. The
// deadline counts from Trial, on disk: a daemon that restarts mid-trial
// resumes it.
type bundleTrial struct {
	rootDir string
	store   *image.Store
	agent   trialAgent
	logger  *slog.Logger
	relist  func() // makes the bundle source read the state again
	wake    chan struct{}
	now     func() time.Time

	mu       sync.Mutex // guards lastSent
	lastSent source.BundleSent
	// logged is the last trouble logged, not repeated at each wake.
	logged string
}

// trialAgent is what the trial reads of the agent: its pods' published
// statuses and their changes; and where it says what it did.
type trialAgent interface {
	Pods() []v1.Pod
	Changed() <-chan struct{}
	Events() *events.Recorder
	NodeName() string
}

var _ trialAgent = (*agent.Agent)(nil)

func newBundleTrial(rootDir string, store *image.Store, logger *slog.Logger) *bundleTrial {
	return &bundleTrial{rootDir: rootDir, store: store, logger: logger, wake: make(chan struct{}, 1), now: time.Now}
}

// sent is the bundle source's Sent.
func (t *bundleTrial) sent(s source.BundleSent) {
	t.mu.Lock()
	t.lastSent = s
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// bundleRetry is how soon a trial whose state could not be read or written
// is looked at again.
const bundleRetry = 10 * time.Second

// run judges the trial whenever a pod's status changes, the bundle source
// sends, or the deadline comes, until ctx ends.
func (t *bundleTrial) run(ctx context.Context) error {
	t.sweep()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		changed := t.agent.Changed() // before reading: a change after is not missed
		next := t.check()
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.wake:
		case <-changed:
		case <-timer.C:
		}
	}
}

// trouble logs err once until another comes.
func (t *bundleTrial) trouble(msg string, err error) {
	if s := msg + err.Error(); s != t.logged {
		t.logged = s
		t.logger.Error(msg, "err", err)
	}
}

// check judges the trial now and returns when to judge it again (zero:
// at the next change only).
func (t *bundleTrial) check() time.Time {
	now := t.now()
	st, err := bundle.ReadState(t.rootDir)
	if err != nil {
		t.trouble("bundle trial: cannot read the bundles' state", err)
		return now.Add(bundleRetry)
	}
	if st.Current == "" || st.Trial.IsZero() {
		return time.Time{}
	}
	rec, err := bundle.ReadRecord(t.rootDir, st.Current)
	if err != nil {
		t.trouble("bundle trial: cannot read the bundle on trial", err)
		return now.Add(bundleRetry)
	}
	t.logged = ""
	if rec.RollbackAfter <= 0 {
		return t.keep(st, rec, "applied without a rollback-after")
	}
	deadline := st.Trial.Add(rec.RollbackAfter)
	t.mu.Lock()
	sent := t.lastSent
	t.mu.Unlock()
	var notReady []string
	switch {
	case sent.Set.ID != st.Current:
		notReady = []string{"its pods were not started"}
	case sent.Err != nil:
		// Nothing of it runs, nor will: no use waiting for the deadline.
		return t.rollBack(st, rec, "its manifests cannot be used: "+sent.Err.Error())
	default:
		var since time.Time
		notReady, since = t.ready(sent.Pods)
		settle := rollout.Settle(rec.RollbackAfter)
		if len(notReady) == 0 {
			if !now.Before(since.Add(settle)) {
				return t.keep(st, rec, "every pod Ready")
			}
			if now.Before(deadline) {
				return since.Add(settle)
			}
			notReady = []string{fmt.Sprintf("its pods have been Ready only since %s, less than %s", since.UTC().Format(time.RFC3339), settle)}
		}
	}
	if now.Before(deadline) {
		return deadline
	}
	return t.rollBack(st, rec, "not Ready within "+rec.RollbackAfter.String()+": "+strings.Join(notReady, "; "))
}

// maxNotReady bounds the pods a rollback's reason names.
const maxNotReady = 5

// ready says which of pods are not Ready (or Succeeded) as the agent
// publishes them, each with why, and since when all the others are.
func (t *bundleTrial) ready(pods []source.BundlePod) ([]string, time.Time) {
	byUID := map[string]*v1.Pod{}
	all := t.agent.Pods()
	for i := range all {
		if p := &all[i]; p.DeletionTimestamp == nil {
			byUID[manifest.ManifestUID(p)] = p
		}
	}
	var notReady []string
	var since time.Time
	for _, bp := range pods {
		p := byUID[string(bp.UID)]
		name := bp.Namespace + "/" + bp.Name
		if p == nil {
			notReady = append(notReady, name+" (not running)")
			continue
		}
		c := status.Classify(p)
		if c.Phase == v1.PodSucceeded {
			continue
		}
		if !c.Ready {
			why := c.Display
			if c.Message != "" {
				why += ": " + c.Message
			}
			notReady = append(notReady, name+" ("+why+")")
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodReady && cond.LastTransitionTime.After(since) {
				since = cond.LastTransitionTime.Time
			}
		}
	}
	if n := len(notReady); n > maxNotReady {
		notReady = append(notReady[:maxNotReady], fmt.Sprintf("%d more", n-maxNotReady))
	}
	return notReady, since
}

// keep ends the trial of rec, the Current bundle of st: it stays, and the
// bundle it replaced is released.
func (t *bundleTrial) keep(st bundle.State, rec bundle.Record, why string) time.Time {
	now := t.now()
	err := t.change(st, func(cur bundle.State) (bundle.State, string) {
		released := cur.Previous
		cur.Trial, cur.Previous = time.Time{}, ""
		return cur, released
	})
	if err != nil {
		t.trouble("bundle trial: cannot keep the bundle on trial", err)
		return now.Add(bundleRetry)
	}
	t.logger.Info("bundle kept", "bundle", rec.Name, "digest", rec.Digest, "why", why, "replaced", st.Previous)
	t.agent.Events().Eventf(events.NodeRef(t.agent.NodeName()), v1.EventTypeNormal, events.BundleReady,
		"Bundle %s (%s) is Ready: %s", rec.Name, rec.Digest, why)
	return time.Time{}
}

// rollBack ends the trial of rec, the Current bundle of st: the bundle it
// replaced runs again, and rec is released; without one, rec stays.
func (t *bundleTrial) rollBack(st bundle.State, rec bundle.Record, reason string) time.Time {
	now := t.now()
	reason = rollout.Bound(reason, rollout.MaxReason)
	node := events.NodeRef(t.agent.NodeName())
	none := "no bundle before it to roll back to"
	var prev bundle.Record
	var err error
	if st.Previous != "" {
		// One whose record cannot be read is none: the bundle source
		// could not run it, and the failed one would be released under
		// its running pods.
		if prev, err = bundle.ReadRecord(t.rootDir, st.Previous); err != nil {
			none = rollout.Bound("the bundle before it, "+st.Previous+", cannot be read: "+err.Error(), rollout.MaxReason)
		}
	}
	if st.Previous == "" || err != nil {
		err := t.change(st, func(cur bundle.State) (bundle.State, string) {
			cur.Trial, cur.Previous = time.Time{}, ""
			return cur, ""
		})
		if err != nil {
			t.trouble("bundle trial: cannot end the trial", err)
			return now.Add(bundleRetry)
		}
		t.logger.Warn("bundle not Ready in time; "+none+": left running", "bundle", rec.Name, "digest", rec.Digest, "reason", reason)
		t.agent.Events().Eventf(node, v1.EventTypeWarning, events.RolledBack,
			"Bundle %s (%s) %s; %s: left running", rec.Name, rec.Digest, reason, none)
		return time.Time{}
	}
	prevName := prev.Name + " (" + prev.Digest + ")"
	err = t.change(st, func(cur bundle.State) (bundle.State, string) {
		return bundle.State{Current: cur.Previous, RolledBack: &bundle.RolledBack{Digest: rec.Digest, At: now.UTC(), Reason: reason}}, cur.Current
	})
	if err != nil {
		t.trouble("bundle trial: cannot roll back the bundle on trial", err)
		return now.Add(bundleRetry)
	}
	t.logger.Warn("bundle not Ready in time; rolled back", "bundle", rec.Name, "digest", rec.Digest, "reason", reason, "runs", prevName)
	t.agent.Events().Eventf(node, v1.EventTypeWarning, events.RolledBack,
		"Bundle %s (%s) %s; bundle %s runs again", rec.Name, rec.Digest, reason, prevName)
	return time.Time{}
}

// change replaces state.json, under its lock, with what f makes of it and
// releases the bundle f names, unless the state is no longer was (another
// apply came meanwhile: it is judged anew). The bundle source reads the
// state again at once.
func (t *bundleTrial) change(was bundle.State, f func(bundle.State) (bundle.State, string)) error {
	unlock, err := bundle.LockState(t.rootDir)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := bundle.ReadState(t.rootDir)
	if err != nil {
		return err
	}
	if cur.Current != was.Current || !cur.Trial.Equal(was.Trial) {
		return nil // judged again at the next wake, which the change brings
	}
	next, release := f(cur)
	if err := bundle.WriteState(t.rootDir, next); err != nil {
		return err
	}
	if t.relist != nil {
		t.relist()
	}
	if release != "" {
		if err := bundle.Release(t.store, t.rootDir, release, next); err != nil {
			return fmt.Errorf("state written, but releasing bundle %s: %w", release, err)
		}
	}
	return nil
}

// sweep releases, at start, the records no state names any more: a daemon
// stopped between the state's change and the release leaves them pinned.
func (t *bundleTrial) sweep() {
	unlock, err := bundle.LockState(t.rootDir)
	if err != nil {
		t.logger.Warn("bundles: cannot lock the state to sweep old records", "err", err)
		return
	}
	defer unlock()
	st, err := bundle.ReadState(t.rootDir)
	if err != nil {
		return // the trial says why
	}
	entries, err := os.ReadDir(bundle.Dir(t.rootDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.logger.Warn("bundles: cannot list the records", "err", err)
	}
	for _, e := range entries {
		h := e.Name()
		if !e.IsDir() || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" || slices.Contains([]string{st.Current, st.Previous}, h) {
			continue
		}
		if err := bundle.Release(t.store, t.rootDir, h, st); err != nil {
			t.logger.Warn("bundles: cannot release an old record", "bundle", h, "err", err)
		} else {
			t.logger.Info("bundles: released a record no state names", "bundle", h)
		}
	}
}
