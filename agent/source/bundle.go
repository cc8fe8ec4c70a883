package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/tick"
)

// MaxBundleFiles bounds the manifests of one bundle the source reads; a
// bundle with more is refused whole. Each file is bounded by
// manifest.MaxSize, as a directory's are.
const MaxBundleFiles = 256

// BundleSet is the bundle the node runs, as the daemon reads it from the
// state of its applied bundles (agent/ never reads that state itself: the
// daemon owns its format).
type BundleSet struct {
	ID   string // the digest of the bundle's manifest, hex; "" for none
	Name string // the bundle's name, in its pods' origins
	Dir  string // the directory of its manifests
}

// BundleSent is what the bundle source last sent: the pods of the bundle
// with ID, or why that bundle's manifests give none (Err).
type BundleSent struct {
	Set  BundleSet
	Pods []BundlePod
	Err  error
}

// BundlePod is one pod of a bundle, by full name and by the UID its
// manifest gives it (manifest.ManifestUID of what runs).
type BundlePod struct {
	Namespace, Name string
	UID             types.UID
}

// Bundle delivers the pods of the bundle the node runs (the daemon's
// signed bundles), all of them in one update: a bundle is one generation,
// used whole or not at all. Its manifests are read as a directory's files
// (source manifest.SourceBundle, origin "bundle NAME/FILE"), once per bundle:
// a bundle's directory never changes once applied. Which bundle runs is
// asked of Current at start, on every change in Dir (the state's
// directory, watched with inotify) and every period.
//
// A bundle whose manifests cannot all be used gives no pods: the source
// keeps sending the last bundle that was usable (none after a start), with
// a problem naming the files.
type Bundle struct {
	BundleConfig
	relist chan struct{}

	// Owned by Run's goroutine.
	set  BundleSet // the bundle of good, or the one found unusable
	good bundleParse
	bad  error // why set's manifests are unusable; nil when good is set's
	last string
	sent bool
	// stateErr is the last error of Current, logged once.
	stateErr string
	seenAt   map[types.UID]time.Time
}

// BundleConfig is what a bundle source reads.
type BundleConfig struct {
	// Dir is watched: a change of any file in it lists again.
	Dir string
	// Current says which bundle runs now; an error keeps what runs.
	Current  func() (BundleSet, error)
	NodeName string
	Period   time.Duration
	Seen     manifest.SeenFunc
	Logger   *slog.Logger
	// Store, when set, keeps the manifest of each started pod with its
	// state, as the file source's.
	Store Store
	// Credentials is the directory the values of Secrets' credentials are
	// read from ($CREDENTIALS_DIRECTORY).
	Credentials string
	// Sent, when set, hears of each bundle sent: the daemon judges a
	// bundle on trial by its pods.
	Sent func(BundleSent)
}

// bundleParse is what one bundle's manifests gave.
type bundleParse struct {
	set       BundleSet
	pods      []manifest.Pod
	objects   []*objects.Object
	warnings  []manifest.Problem
	manifests []Manifest
}

// Relist makes Run ask which bundle runs now. It never blocks.
func (b *Bundle) Relist() {
	select {
	case b.relist <- struct{}{}:
	default:
	}
}

// NewBundle returns the bundle source of cfg.
func NewBundle(cfg BundleConfig) *Bundle {
	return &Bundle{BundleConfig: cfg, relist: make(chan struct{}, 1), seenAt: map[types.UID]time.Time{}}
}

// Run sends the bundle's pod set at start and whenever the bundle that runs
// changes, until ctx ends.
func (b *Bundle) Run(ctx context.Context, out chan<- Update) error {
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if w, err := fsnotify.NewWatcher(); err != nil {
		b.Logger.Warn("cannot watch the bundles; relisting periodically only", "err", err)
	} else {
		defer w.Close()
		if err := w.Add(b.Dir); err != nil {
			b.Logger.Warn("cannot watch the bundles; relisting periodically only", "dir", b.Dir, "err", err)
		}
		events, watchErrs = w.Events, w.Errors
	}
	ticker := tick.New(b.Period)
	defer ticker.Stop()
	for {
		if err := b.send(ctx, out, b.list()); err != nil {
			return nil // ctx ended while sending: not an error
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
				break wait
			case <-b.relist:
				break wait
			case <-events:
				// Every change of the directory: the state is replaced
				// by a rename, and a burst is one list.
				drain(events)
				break wait
			case err := <-watchErrs:
				b.Logger.Warn("watching the bundles failed; listing again", "err", err)
				break wait
			}
		}
	}
}

func drain(events <-chan fsnotify.Event) {
	for {
		select {
		case <-events:
		default:
			return
		}
	}
}

// list asks which bundle runs and returns the update of its pods.
func (b *Bundle) list() Update {
	set, err := b.Current()
	var problems []manifest.Problem
	switch {
	case err != nil:
		// Keep what runs: an unreadable state says nothing of the pods.
		problems = append(problems, manifest.Problem{Origin: b.Dir, Err: err})
		if err.Error() != b.stateErr {
			b.Logger.Error("cannot read which bundle runs; keeping its pods", "err", err)
		}
		b.stateErr = err.Error()
	case set.ID == "":
		b.stateErr = ""
		b.set, b.good, b.bad = set, bundleParse{}, nil
	case set.ID == b.set.ID:
		b.stateErr = ""
	default:
		b.stateErr, b.set = "", set
		parsed, perr := b.read(set)
		if perr != nil {
			b.bad = perr
			b.Logger.Error("bundle unusable; keeping the pods of the one before", "bundle", set.Name, "digest", set.ID, "err", perr)
		} else {
			b.good, b.bad = parsed, nil
			b.Logger.Info("bundle read", "bundle", set.Name, "digest", set.ID, "pods", len(parsed.pods), "objects", len(parsed.objects))
		}
	}
	if b.bad != nil && err == nil {
		problems = append(problems, manifest.Problem{Origin: bundleOrigin(b.set.Name, ""), Err: b.bad})
	}
	return b.update(problems)
}

// bundleOrigin is the origin of a bundle's file: "bundle NAME/FILE".
func bundleOrigin(name, file string) string {
	if file == "" {
		return "bundle " + name
	}
	return "bundle " + name + "/" + file
}

// read parses every manifest of set, all or none: the first file that
// cannot be used refuses the bundle, with every file's errors.
func (b *Bundle) read(set BundleSet) (bundleParse, error) {
	out := bundleParse{set: set}
	entries, err := os.ReadDir(set.Dir)
	if err != nil {
		return out, fmt.Errorf("bundle %s (%s): %w", set.Name, set.ID, err)
	}
	var errs []error
	n := 0
	for _, e := range entries {
		if skip, _ := manifest.Skip(e.Name()); skip {
			continue
		}
		if n++; n > MaxBundleFiles {
			return out, fmt.Errorf("bundle %s (%s): more than %d manifests", set.Name, set.ID, MaxBundleFiles)
		}
		origin := bundleOrigin(set.Name, e.Name())
		// A bundle's manifests are files the daemon wrote: anything else
		// there (a symlink, a FIFO) is not followed.
		if !e.Type().IsRegular() {
			errs = append(errs, fmt.Errorf("%s: not a regular file", origin))
			continue
		}
		data, err := readAtMost(filepath.Join(set.Dir, e.Name()), manifest.MaxSize)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", origin, err))
			continue
		}
		parsed := checkBundleFile(set.Name, e.Name(), data, b.NodeName)
		if err := parsed.Err(); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range parsed.Warnings {
			out.warnings = append(out.warnings, manifest.Problem{Origin: origin, Err: errors.New(w.String()), Warning: true})
		}
		keep := parsed.WithoutSecretValues(data, manifest.SourceBundle)
		for _, p := range parsed.Pods {
			out.manifests = append(out.manifests, Manifest{UID: p.UID, Source: manifest.SourceBundle, Origin: origin, Data: keep})
		}
		out.pods = append(out.pods, parsed.Pods...)
		out.objects = append(out.objects, parsed.Objects...)
	}
	if len(errs) > 0 {
		return bundleParse{set: set}, errors.Join(errs...)
	}
	return out, nil
}

// checkBundleFile parses the manifest file of bundle name as the bundle
// source does.
func checkBundleFile(name, file string, data []byte, nodeName string) manifest.Parsed {
	return manifest.Check(data, manifest.SourceBundle, bundleOrigin(name, file), nodeName)
}

// CheckBundle says whether the manifest files of bundle name (by file
// name) give pods the bundle source runs on node nodeName: every error of
// every file, nil when they all do. An applier checks a bundle with it
// before anything of it is imported.
func CheckBundle(name string, files map[string][]byte, nodeName string) error {
	if len(files) > MaxBundleFiles {
		return fmt.Errorf("bundle %s: more than %d manifests", name, MaxBundleFiles)
	}
	var errs []error
	for _, file := range slices.Sorted(maps.Keys(files)) {
		if skip, _ := manifest.Skip(file); skip {
			errs = append(errs, fmt.Errorf("%s: a file name the bundle source skips", bundleOrigin(name, file)))
			continue
		}
		if err := checkBundleFile(name, file, files[file], nodeName).Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// update is the set of the last usable bundle, with problems.
func (b *Bundle) update(problems []manifest.Problem) Update {
	objs, credProblems := fillCredentials(b.Credentials, b.good.objects)
	problems = append(append(problems, b.good.warnings...), credProblems...)
	u := Update{Source: manifest.SourceBundle, Pods: make([]manifest.Pod, 0, len(b.good.pods)), Objects: objs, Problems: problems}
	var fp strings.Builder
	fmt.Fprintf(&fp, "bundle %s\n", b.good.set.ID)
	for _, o := range objs {
		fmt.Fprintf(&fp, "object %s %s %s\n", o.Origin, o.Key(), objectDigest(o))
	}
	for _, p := range problems {
		fmt.Fprintf(&fp, "problem %s %s\n", p.Origin, p.Err)
	}
	u.fingerprint = fp.String()
	seenAt := map[types.UID]time.Time{}
	for i, pod := range b.good.pods {
		t, ok := b.seenAt[pod.UID]
		if !ok {
			t = time.Now()
			if b.Seen != nil {
				t = b.Seen(pod.UID)
			}
		}
		seenAt[pod.UID] = t
		// Kept stamped: the next update hands the same pod again.
		pod, _ = manifest.Stamped(pod, t)
		b.good.pods[i].Pod = pod.Pod
		u.Pods = append(u.Pods, pod)
	}
	b.seenAt = seenAt
	return u
}

// send sends u unless it says what the last one did; the first is always
// sent, so that the source counts as seen even when the node runs no
// bundle.
func (b *Bundle) send(ctx context.Context, out chan<- Update, u Update) error {
	if b.sent && u.fingerprint == b.last {
		return nil
	}
	if b.Store != nil {
		b.Store.Offer(manifest.SourceBundle, b.good.manifests)
	}
	select {
	case out <- u:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.sent, b.last = true, u.fingerprint
	sent := BundleSent{Set: b.set, Err: b.bad}
	if b.bad == nil {
		for _, p := range b.good.pods {
			sent.Pods = append(sent.Pods, BundlePod{Namespace: p.Namespace, Name: p.Name, UID: p.UID})
		}
	}
	slices.SortFunc(sent.Pods, func(x, y BundlePod) int { return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name) })
	if b.Sent != nil {
		b.Sent(sent)
	}
	return nil
}
