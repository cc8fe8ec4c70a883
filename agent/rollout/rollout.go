// Package rollout keeps, per static pod name, the generations the pod ran
// (each one's manifest, UID, image IDs, when it started, was Ready or
// failed, and why), and decides from them whether a new generation that is
// not Ready in time is rolled back, and to which: the health-gated rollouts
// of the staticpodd.io/rollback-after annotation, and `staticpodd rollout`.
//
// A pod's history lives in <root-dir>/rollouts/<namespace>_<name>.json,
// written with atomicfile: unlike <root-dir>/pods/<uid>, it outlives every
// generation, so that the last Ready one can be brought back after the
// daemon restarted or was killed mid-rollout.
package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
)

// Bounds of a history: the generations kept, the manifest kept with each
// (a larger one is recorded without it, and cannot be rolled back to), the
// reason of a failure, and the file read back (a file larger than any
// history written is refused, not read).
const (
	MaxGenerations = 10
	MaxManifest    = 1 << 20
	MaxReason      = 1024
	maxImages      = 64
	maxFile        = MaxGenerations*(2*MaxManifest+maxImages*1024+8*MaxReason) + 64<<10
)

// How a generation was stopped for another.
const (
	ByDeadline = "deadline" // not Ready within its rollback-after
	ByUndo     = "undo"     // the operator's `rollout undo`
)

// Generation is one run of a pod: a manifest (a new UID) or the same
// manifest brought back by a rollback.
type Generation struct {
	UID      string `json:"uid"`
	Source   string `json:"source,omitempty"`
	Origin   string `json:"origin,omitempty"`
	Manifest string `json:"manifest,omitempty"` // the source's bytes; "" when larger than MaxManifest
	// Images are the image IDs (digests) its containers ran, by container.
	Images    map[string]string `json:"images,omitempty"`
	StartedAt time.Time         `json:"startedAt"`
	ReadyAt   time.Time         `json:"readyAt,omitzero"` // first Ready
	// PassedAt is when it was found Ready at its rollback-after deadline:
	// Ready once is not enough, a container may crash a second after.
	PassedAt time.Time `json:"passedAt,omitzero"`
	// FailedAt and Reason: it was not Ready by its deadline, why.
	FailedAt time.Time `json:"failedAt,omitzero"`
	Reason   string    `json:"reason,omitempty"`
	// RolledBack says how it was stopped for an earlier generation
	// (ByDeadline, ByUndo); "" if it was not.
	RolledBack string `json:"rolledBack,omitempty"`
	// RollbackOf is the UID of the generation whose rollback started this
	// run: a run that never loops into another rollback.
	RollbackOf string `json:"rollbackOf,omitempty"`
	// Content names what it runs: its manifest's content and its
	// containers' images, without what staticpodd restart or
	// restart-on-change files mix into UID.
	Content string `json:"content,omitempty"`
}

// Rejected is a generation rolled back while its source still offers it:
// the earlier generation Target runs instead until the source's content
// changes again.
type Rejected struct {
	UID    string `json:"uid"`
	Target string `json:"target"`
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	// Content is the rejected generation's (Generation.Content): offered
	// again under another UID (a restart, a restart-on-change file that
	// changed), it stays rejected; a followed tag that moved on is new
	// content.
	Content string `json:"content,omitempty"`
}

// History is what is kept of one pod name, oldest generation first.
type History struct {
	Namespace   string       `json:"namespace"`
	Name        string       `json:"name"`
	Generations []Generation `json:"generations"`
	Rejected    *Rejected    `json:"rejected,omitempty"`
}

// Current is the newest generation, nil if none.
func (h *History) Current() *Generation {
	if len(h.Generations) == 0 {
		return nil
	}
	return &h.Generations[len(h.Generations)-1]
}

// Find is the generation of uid, nil if it is not kept.
func (h *History) Find(uid string) *Generation {
	for i := len(h.Generations) - 1; i >= 0; i-- {
		if h.Generations[i].UID == uid {
			return &h.Generations[i]
		}
	}
	return nil
}

// Start records that generation g (its UID, source, origin, manifest)
// began to run at now, unless it is the current run already: one started
// before a daemon restart keeps its start, so its deadline holds. A UID run
// before is moved to the end as a new run, without its earlier Ready or
// failure. It reports whether h changed.
func (h *History) Start(g Generation, now time.Time) bool {
	if c := h.Current(); c != nil && c.UID == g.UID {
		return false
	}
	if len(g.Manifest) > MaxManifest {
		g.Manifest = ""
	}
	for i := range h.Generations {
		if h.Generations[i].UID == g.UID {
			h.Generations = append(h.Generations[:i], h.Generations[i+1:]...)
			break
		}
	}
	g.StartedAt, g.ReadyAt, g.PassedAt, g.FailedAt, g.Reason, g.RolledBack = now, time.Time{}, time.Time{}, time.Time{}, "", ""
	h.Generations = append(h.Generations, g)
	if n := len(h.Generations); n > MaxGenerations {
		h.Generations = append([]Generation(nil), h.Generations[n-MaxGenerations:]...)
	}
	return true
}

// Ready records that the current generation, uid, is Ready at now with
// images; it reports whether h changed (only its first Ready counts).
func (h *History) Ready(uid string, now time.Time, images map[string]string) bool {
	if !h.AwaitsReady(uid) {
		return false
	}
	c := h.Current()
	c.ReadyAt, c.Images = now, boundImages(images)
	return true
}

// AwaitsReady reports whether Ready would record uid Ready: it is the
// current generation, not Ready yet and not failed.
func (h *History) AwaitsReady(uid string) bool {
	c := h.Current()
	return c != nil && c.UID == uid && c.ReadyAt.IsZero() && c.FailedAt.IsZero()
}

// Deadline is when the current generation uid is judged, given its
// rollback-after d: Ready then, it passes (Pass), else it fails. Zero when
// it has none, or was judged already.
func (h *History) Deadline(uid string, d time.Duration) time.Time {
	c := h.Current()
	if d <= 0 || c == nil || c.UID != uid || !c.PassedAt.IsZero() || !c.FailedAt.IsZero() {
		return time.Time{}
	}
	return c.StartedAt.Add(d)
}

// Settle is how long a generation must have been Ready, without a break,
// when its rollback-after d passes: a third of d, at most 10s. Ready at
// that instant alone is not enough: a crash-looping container is Ready
// for a moment at each restart.
func Settle(d time.Duration) time.Duration {
	return min(d/3, 10*time.Second)
}

// Pass records that the current generation uid was Ready at its deadline.
func (h *History) Pass(uid string, now time.Time) bool {
	c := h.Current()
	if c == nil || c.UID != uid || c.ReadyAt.IsZero() || !c.PassedAt.IsZero() || !c.FailedAt.IsZero() {
		return false
	}
	c.PassedAt = now
	return true
}

// usable says whether g may be rolled back to: it was Ready, never failed
// nor was rolled back, and its manifest is kept.
func (g *Generation) usable() bool {
	return !g.ReadyAt.IsZero() && g.FailedAt.IsZero() && g.RolledBack == "" && g.Manifest != ""
}

// Target is the generation a rollback of the current one brings back: the
// newest other one that was Ready and whose manifest is kept. nil when
// there is none, or when the current run is itself a rollback (a rollback
// never loops).
func (h *History) Target() *Generation {
	c := h.Current()
	if c == nil || c.RollbackOf != "" {
		return nil
	}
	for i := len(h.Generations) - 2; i >= 0; i-- {
		g := &h.Generations[i]
		if g.UID != c.UID && g.usable() {
			return g
		}
	}
	return nil
}

// Fail records that the current generation uid failed at now for reason,
// with the images its containers ran unless known already (it was never
// Ready), and, when by is set, that it is rolled back (by ByDeadline or ByUndo) to
// target, which runs instead from now on. It reports whether h changed.
func (h *History) Fail(uid string, now time.Time, reason string, images map[string]string, by string, target *Generation) bool {
	c := h.Current()
	if c == nil || c.UID != uid || !c.FailedAt.IsZero() {
		return false
	}
	c.FailedAt, c.Reason = now, Bound(reason, MaxReason)
	if len(c.Images) == 0 {
		c.Images = boundImages(images)
	}
	if by != "" && target != nil {
		c.RolledBack = by
		h.Rejected = &Rejected{UID: uid, Target: target.UID, By: by, Reason: c.Reason, Content: c.Content}
	}
	return true
}

// Offered is what the source offers for the pod now, the generation uid of
// content: once it is not the rejected generation's content (the file's
// content changed again, a followed tag moved on), the rejection is lifted.
// It returns the rejection in force, nil if none, and whether h changed.
func (h *History) Offered(uid, content string) (*Rejected, bool) {
	r := h.Rejected
	switch {
	case r == nil:
		return nil, false
	case r.UID == uid, r.Content != "" && r.Content == content:
		return r, false
	}
	h.Rejected = nil
	return nil, true
}

// Bound cuts s to at most n bytes, on a rune boundary, saying so.
func Bound(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	const more = "... (cut)"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

func boundImages(images map[string]string) map[string]string {
	out := make(map[string]string, min(len(images), maxImages))
	for name, id := range images {
		if len(out) == maxImages {
			break
		}
		out[Bound(name, 256)] = Bound(id, 512)
	}
	return out
}

// Store is the histories under <root-dir>/rollouts.
type Store struct{ dir string }

// NewStore returns the store of the daemon whose root dir is rootDir.
func NewStore(rootDir string) *Store {
	return &Store{dir: filepath.Join(rootDir, "rollouts")}
}

// Dir is where the histories are.
func (s *Store) Dir() string { return s.dir }

// file is the history of namespace/name. Both are DNS names once validated
// (no '/', no '_'); anything else is refused rather than made a path.
func (s *Store) file(namespace, name string) (string, error) {
	for _, n := range []string{namespace, name} {
		if n == "" || len(n) > 253 || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-.") != "" || strings.HasPrefix(n, ".") {
			return "", fmt.Errorf("invalid pod name %q", namespace+"/"+name)
		}
	}
	return filepath.Join(s.dir, namespace+"_"+name+".json"), nil
}

// Load reads the history of namespace/name: empty when there is none. A
// history that cannot be read (truncated, tampered with, too large) is an
// error naming the file; the caller reports it and starts afresh.
func (s *Store) Load(namespace, name string) (*History, error) {
	empty := &History{Namespace: namespace, Name: name}
	file, err := s.file(namespace, name)
	if err != nil {
		return empty, err
	}
	b, err := atomicfile.Read(file, maxFile)
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil
	} else if err != nil {
		return empty, fmt.Errorf("rollout history: %w", err)
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return empty, fmt.Errorf("rollout history %s is damaged: %w", file, err)
	}
	if err := h.check(namespace, name); err != nil {
		return empty, fmt.Errorf("rollout history %s is damaged: %w", file, err)
	}
	return &h, nil
}

// check holds a history read back to what Save writes.
func (h *History) check(namespace, name string) error {
	switch {
	case h.Namespace != namespace || h.Name != name:
		return fmt.Errorf("it is the history of %s/%s", h.Namespace, h.Name)
	case len(h.Generations) > MaxGenerations:
		return fmt.Errorf("%d generations, more than %d", len(h.Generations), MaxGenerations)
	}
	for _, g := range h.Generations {
		if g.UID == "" || len(g.UID) > 256 || len(g.Manifest) > MaxManifest || len(g.Reason) > MaxReason || len(g.Images) > maxImages {
			return errors.New("a generation has no UID or is larger than what is kept")
		}
	}
	if r := h.Rejected; r != nil && (h.Find(r.UID) == nil || h.Find(r.Target) == nil) {
		return errors.New("the rejected generation or its target is not kept")
	}
	return nil
}

// Save writes h, atomically and durably.
func (s *Store) Save(h *History) error {
	b, err := Encode(h)
	if err != nil {
		return err
	}
	return s.Write(h.Namespace, h.Name, b)
}

// Encode is h as Save writes it: a caller that guards h with a lock
// encodes it under the lock and writes it (Write) after.
func Encode(h *History) ([]byte, error) { return json.Marshal(h) }

// Decode decodes into h what Encode encoded.
func Decode(b []byte, h *History) error { return json.Unmarshal(b, h) }

// Write writes the encoded history of namespace/name, atomically and
// durably.
func (s *Store) Write(namespace, name string, b []byte) error {
	file, err := s.file(namespace, name)
	if err != nil {
		return err
	}
	if err := atomicfile.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(file, b)
}

// Names are the pods, namespace/name, that have a history, at most
// MaxNames of them.
func (s *Store) Names() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var out []string
	for _, e := range entries {
		ns, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".json"), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".json") || len(out) == MaxNames {
			continue
		}
		if _, ferr := s.file(ns, name); ferr == nil {
			out = append(out, ns+"/"+name)
		}
	}
	return out, err
}

// MaxNames bounds Names.
const MaxNames = 10000

// Match is the one name of names (namespace/name) that arg names: the pod's
// name, or its manifest's (the name without the node's suffix), each
// optionally namespace/, in namespace when it is not "". It lets `rollout`
// find a pod that no longer runs, from its history alone.
func Match(names []string, arg, namespace string) (string, string, error) {
	if ns, n, ok := strings.Cut(arg, "/"); ok {
		namespace, arg = ns, n
	}
	var found []string
	for _, full := range names {
		ns, name, _ := strings.Cut(full, "/")
		if (namespace == "" || ns == namespace) && (name == arg || strings.HasPrefix(name, arg+"-")) {
			found = append(found, full)
		}
	}
	if len(found) != 1 {
		return "", "", fmt.Errorf("no pod %q (%d rollout histories match)", arg, len(found))
	}
	ns, name, _ := strings.Cut(found[0], "/")
	return ns, name, nil
}

// Remove forgets the history of namespace/name.
func (s *Store) Remove(namespace, name string) error {
	file, err := s.file(namespace, name)
	if err != nil {
		return err
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Status is where the current generation of a pod is, as `rollout status`
// says it.
type Status struct {
	State   string `json:"state"` // StateProgressing, StateReady, StateRolledBack, StateFailed or StateNone
	Message string `json:"message"`
}

// States of Status.
const (
	StateNone        = "none"
	StateProgressing = "progressing"
	StateReady       = "ready"
	StateRolledBack  = "rolled back"
	StateFailed      = "failed"
)

// Failed says whether the state is one `rollout status` exits non-zero for,
// as kubectl's does for a rollout that exceeded its progress deadline.
func (s Status) Failed() bool { return s.State == StateRolledBack || s.State == StateFailed }

// Status says where h's current generation is; deadline is its
// rollback-after (0: none).
func (h *History) Status(rollbackAfter time.Duration) Status {
	c := h.Current()
	switch {
	case c == nil:
		return Status{StateNone, "no generation recorded"}
	case h.Rejected != nil && (h.Rejected.Target == c.UID || h.Rejected.UID == c.UID):
		// The target may not have started yet: the rejected generation
		// is still stopping.
		msg := fmt.Sprintf("generation %s rolled back (%s) to %s: %s", h.Rejected.UID, h.Rejected.By, h.Rejected.Target, h.Rejected.Reason)
		if h.Rejected.Target == c.UID && !c.FailedAt.IsZero() {
			msg += fmt.Sprintf("; the generation rolled back to failed too, and is left running: %s", c.Reason)
		}
		return Status{StateRolledBack, msg}
	case !c.FailedAt.IsZero():
		return Status{StateFailed, fmt.Sprintf("generation %s was not Ready in time: %s", c.UID, c.Reason)}
	case !c.ReadyAt.IsZero() && h.Deadline(c.UID, rollbackAfter).IsZero():
		return Status{StateReady, fmt.Sprintf("generation %s Ready since %s", c.UID, c.ReadyAt.UTC().Format(time.RFC3339))}
	}
	msg := fmt.Sprintf("waiting for generation %s to be Ready (started %s", c.UID, c.StartedAt.UTC().Format(time.RFC3339))
	if !c.ReadyAt.IsZero() {
		msg = fmt.Sprintf("generation %s Ready since %s (started %s", c.UID, c.ReadyAt.UTC().Format(time.RFC3339), c.StartedAt.UTC().Format(time.RFC3339))
	}
	if dl := h.Deadline(c.UID, rollbackAfter); !dl.IsZero() {
		msg += ", rolled back if not Ready at " + dl.UTC().Format(time.RFC3339)
	}
	return Status{StateProgressing, msg + ")"}
}

// Undo rolls the current generation back to the previous one that was
// Ready, at the operator's request, and returns it. The rejection is of
// what the source offers: the current generation, or the one rolled back
// already when the current run is a rollback.
func (h *History) Undo(now time.Time) (*Generation, error) {
	c := h.Current()
	if c == nil {
		return nil, errors.New("no generation recorded")
	}
	offered := c.UID
	if h.Rejected != nil {
		offered = h.Rejected.UID
	}
	for i := len(h.Generations) - 2; i >= 0; i-- {
		g := &h.Generations[i]
		if g.UID == c.UID || g.UID == offered || !g.usable() {
			continue
		}
		if c.FailedAt.IsZero() {
			c.FailedAt, c.Reason = now, "undone by the operator"
		}
		c.RolledBack = ByUndo
		h.Rejected = &Rejected{UID: offered, Target: g.UID, By: ByUndo, Reason: "rollout undo by the operator"}
		if o := h.Find(offered); o != nil {
			h.Rejected.Content = o.Content
		}
		return g, nil
	}
	return nil, errors.New("no earlier generation that was Ready, with its manifest, is kept")
}

// ErrRolledBack refuses what would lift a rejection in force without its
// source's content changing: a restart's new UID would bring back the
// generation rolled back.
var ErrRolledBack = errors.New("the pod runs an earlier generation in place of its file's")
