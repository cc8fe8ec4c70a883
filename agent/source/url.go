package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// DefaultURLPeriod is httpCheckFrequency's default, the kubelet's.
const DefaultURLPeriod = 20 * time.Second

// URLConfig is what the URL source reads and how.
type URLConfig struct {
	URL      string      // staticPodURL, http or https
	Header   http.Header // staticPodURLHeader, sent with every request
	NodeName string
	Period   time.Duration // httpCheckFrequency; 0 = DefaultURLPeriod
	Timeout  time.Duration // of one request, body included; 0 = DefaultURLTimeout
	CAFile   string        // PEM certificates trusted besides the system roots
	// SaveFile keeps the last good body across restarts; "" keeps nothing.
	SaveFile string
	// Seen gives the first-seen time of a pod UID for kubernetes.io/config.seen
	// (nil: the current time).
	Seen manifest.SeenFunc
	// Credentials is the directory the values of Secrets' credentials are
	// read from ($CREDENTIALS_DIRECTORY); "" when there is none.
	Credentials string
	// OnChange, when set, is called from Run whenever Status changes.
	OnChange func(URLStatus)
	// Requests, when set, counts the requests made; one is shared by the
	// sources a reload makes, so that the count goes on.
	Requests *RequestCounts
	// Bundle, when set, applies a bundle the URL serves instead of a
	// manifest; nil reads every body as a manifest.
	Bundle *URLBundle
}

// URLBundle is how the URL source applies a bundle its URL serves: the
// daemon's (agent/ does not read bundles). Its pods are the bundle
// source's; the URL source's own set is then empty.
type URLBundle struct {
	Stage BundleStage
	// Apply verifies and applies the bundle staged at path, as served by
	// the URL; an error leaves the node as it was.
	Apply func(ctx context.Context, path string) error
}

// RequestCounts counts the requests of URL sources: all of them, and those
// that failed (no body read: refused, timed out, an HTTP error status).
type RequestCounts struct {
	Total, Failed atomic.Uint64
}

// URLStatus is how the URL source is doing, for /healthz and STATUS=.
type URLStatus struct {
	URL string // redacted (Redact)
	// Err says why the pods in use are not what the URL serves now: the last
	// request failed or its body is unusable. nil when they are.
	Err   error
	Since time.Time // when Err began
}

// URL delivers the static pods a URL serves, a Pod or a PodList, polled every
// period as the kubelet's URL source (pkg/kubelet/config/http.go) polls it.
// Unlike the kubelet it keeps the last good set when the body turns empty,
// logs a failure once per cause rather than three times, and saves the last
// good body so that a restart while the server is down finds its pods.
type URL struct {
	cfg    URLConfig
	origin string // the URL as shown and as pods are named after
	client *Client
	logger *slog.Logger
	relist chan struct{}

	mu     sync.Mutex // guards status, read by Status from other goroutines
	status URLStatus

	// Owned by Run's goroutine.
	good     goodSet
	received [sha256.Size]byte // sum of the last body read, good or not
	bodyErr  error             // why that body is unusable; nil when it is the good set
	fetchErr *manifest.Error   // why the last request gave no body; nil when it did
	failures failureLog
	unsaved  []byte // a good body not saved yet
	saveErr  string
	seenAt   map[types.UID]time.Time
	dirty    bool // the set or its problem may have changed since the last send
	// bundle is the digest of the last bundle body applied or refused: the
	// same one is not applied again, nor after a restart once applied (it
	// may have been rolled back since).
	bundle string
	last   string // fingerprint of the last update sent
	sent   bool
}

// goodSet is the last body that gave a usable set.
type goodSet struct {
	sum     [sha256.Size]byte
	pods    []manifest.Pod // stamped with config.seen once handed (manifest.Stamped)
	objects []*objects.Object
	dropped error // list items left out as duplicates, nil if none
	// credentials says whether a Secret of the set takes values from
	// credentials: they are read again at every poll.
	credentials bool
}

func newGoodSet(sum [sha256.Size]byte, p manifest.Parsed) goodSet {
	pods, dropped := DropDuplicates(p.Pods)
	g := goodSet{sum: sum, pods: pods, objects: p.Objects, dropped: dropped}
	for _, o := range p.Objects {
		g.credentials = g.credentials || len(o.Credentials) > 0
	}
	return g
}

// NewURL returns the source of cfg.URL. It reads nothing before Run.
func NewURL(cfg URLConfig, logger *slog.Logger) *URL {
	if cfg.Period <= 0 {
		cfg.Period = DefaultURLPeriod
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultURLTimeout
	}
	origin := Redact(cfg.URL)
	return &URL{
		cfg:    cfg,
		origin: origin,
		client: NewClient(cfg.CAFile, cfg.Timeout),
		logger: logger.With("url", origin),
		relist: make(chan struct{}, 1),
		status: URLStatus{URL: origin},
		dirty:  true,
	}
}

// Relist makes Run poll now (systemctl reload). It never blocks.
func (s *URL) Relist() {
	select {
	case s.relist <- struct{}{}:
	default:
	}
}

// Status returns how the source is doing now.
func (s *URL) Status() URLStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Run polls the URL at once and then every period (sliding: the period
// starts when a poll ends, as wait.Until's), and sends the whole set on out
// whenever it changes, until ctx ends.
//
// The first update goes out after the first request, whatever its outcome,
// so the agent is not held by a down server: its set is what the URL serves,
// else the set saved by the last daemon (with the failure as a problem), else
// none. A request waits at most Timeout, so the first update comes within it.
func (s *URL) Run(ctx context.Context, out chan<- Update) error {
	s.load()
	if b := s.cfg.Bundle; b != nil {
		b.Stage.removeLeft(s.logger)
	}
	s.logger.Info("polling the manifest URL", "period", s.cfg.Period)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-s.relist:
			timer.Stop()
		}
		s.poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		s.publish()
		if s.send(ctx, out) != nil {
			return nil
		}
		// After the send: an fsync must not delay the pods.
		s.save()
		timer.Reset(s.cfg.Period)
	}
}

// Once sends one update, as Run's first (run --once): the set the URL
// serves, else the saved set with the failure as a problem, else none.
func (s *URL) Once(ctx context.Context, out chan<- Update) error {
	s.load()
	s.poll(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	s.publish()
	if err := s.send(ctx, out); err != nil {
		return err
	}
	s.save()
	return nil
}

// poll reads the URL once and updates the state. A body with the same bytes
// as the last one read is not parsed again.
func (s *URL) poll(ctx context.Context) {
	var body []byte
	var staged *Staged
	var err error
	if s.cfg.Bundle != nil {
		body, staged, err = s.client.fetch(ctx, s.cfg.URL, s.cfg.Header, &s.cfg.Bundle.Stage)
	} else {
		body, err = s.client.Fetch(ctx, s.cfg.URL, s.cfg.Header)
	}
	if staged != nil {
		defer os.Remove(staged.Path)
	}
	if ctx.Err() != nil {
		return
	}
	if c := s.cfg.Requests; c != nil {
		c.Total.Add(1)
		if err != nil {
			c.Failed.Add(1)
		}
	}
	if err != nil {
		s.fail(err)
		return
	}
	if s.fetchErr != nil {
		s.logger.Info("the manifest URL answers again", "failures", s.failures.count,
			"failingFor", time.Since(s.failures.since).Round(time.Second))
		s.fetchErr, s.failures, s.dirty = nil, failureLog{}, true
	}
	if staged != nil {
		s.applyBundle(ctx, staged)
		return
	}
	if s.bundle != "" {
		// A manifest again: a bundle served later is applied again.
		s.bundle = ""
		s.forgetBundle()
	}
	sum := sha256.Sum256(body)
	if sum == s.received {
		return // the same bytes: nothing to parse, nothing new to send
	}
	s.received, s.dirty = sum, true
	parsed := s.parse(body)
	if err := parsed.Err(); err != nil {
		s.bodyErr = err
		s.logger.Error("unusable pods from the manifest URL; keeping the last good set",
			"err", err, "kept", len(s.good.pods))
		return
	}
	s.bodyErr = nil
	s.good = newGoodSet(sum, parsed)
	s.logger.Info("pods from the manifest URL", "pods", len(s.good.pods), "objects", len(s.good.objects))
	if s.good.dropped != nil {
		s.logger.Warn("pods of the manifest URL left out", "err", s.good.dropped)
	}
	s.unsaved = body
}

// applyBundle applies the bundle the URL serves, unless it is the one
// applied or refused last. Applied, it replaces the URL's own set (none);
// refused, the set stays and the problem says why, as for a body that is
// not a usable manifest.
func (s *URL) applyBundle(ctx context.Context, staged *Staged) {
	if staged.Digest == s.bundle {
		return
	}
	s.bundle, s.dirty = staged.Digest, true
	if err := s.cfg.Bundle.Apply(ctx, staged.Path); err != nil {
		if ctx.Err() != nil {
			s.bundle = "" // stopped, not refused
			return
		}
		s.bodyErr = &manifest.Error{Origin: s.origin, Reason: podspec.Truncate("bundle "+staged.Digest+": "+err.Error(), podspec.MaxEventMessage)}
		s.logger.Error("bundle from the manifest URL not applied; keeping what runs", "digest", staged.Digest, "err", err)
		return
	}
	s.logger.Info("bundle from the manifest URL applied", "digest", staged.Digest)
	s.bodyErr = nil
	// The bundle's pods are the bundle source's: the URL gives none, and
	// a manifest it served before and serves again is read anew.
	s.good, s.received = goodSet{}, [sha256.Size]byte{}
	s.unsaved = []byte(emptyPodList)
	s.saveBundle()
}

// emptyPodList is the set of a URL that serves a bundle, as saved.
const emptyPodList = `{"apiVersion":"v1","kind":"PodList","items":[]}`

// parse reads a body, logging its warnings: at most manifest.MaxWarnings
// lines, however many unknown fields the server sends, at every poll.
func (s *URL) parse(body []byte) manifest.Parsed {
	p := ParseURLBody(body, s.origin, s.cfg.NodeName)
	for _, w := range p.Warnings {
		s.logger.Warn("manifest warning", "warning", w.String())
	}
	return p
}

// ParseURLBody reads the body a manifest URL served as the URL source does:
// a Pod, a PodList or a List of Pods, ConfigMaps and Secrets, all of it or
// none, as the kubelet reads a PodList, except that an empty body is an
// error, not an empty set (an empty List is one). origin is the URL as shown
// (Redact).
func ParseURLBody(body []byte, origin, nodeName string) manifest.Parsed {
	if len(bytes.TrimSpace(body)) == 0 {
		return manifest.Parsed{Errors: []*manifest.Error{{Origin: origin, Reason: "empty body; the last good set keeps running (an empty PodList removes it)"}}}
	}
	return manifest.Check(body, manifest.SourceHTTP, origin, nodeName)
}

// fail records a failed request, logging it when failureLog says so.
func (s *URL) fail(err error) {
	now := time.Now()
	if log, again := s.failures.fail(err.Error(), now); log {
		attrs := []any{"err", err, "kept", len(s.good.pods), "retryEvery", s.cfg.Period}
		if again {
			attrs = append(attrs, "failures", s.failures.count, "failingFor", now.Sub(s.failures.since).Round(time.Second))
		}
		s.logger.Warn("cannot read pods from the manifest URL; keeping the last good set", attrs...)
	}
	if s.fetchErr == nil || s.fetchErr.Reason != err.Error() {
		s.fetchErr, s.dirty = &manifest.Error{Origin: s.origin, Reason: err.Error()}, true
	}
}

// problem is why the set in use is not what the URL serves now, or nil.
func (s *URL) problem() error {
	switch {
	case s.fetchErr != nil:
		return s.fetchErr
	case s.bodyErr != nil:
		return s.bodyErr
	}
	return s.good.dropped
}

// publish updates Status and tells OnChange when it changed.
func (s *URL) publish() {
	err := s.problem()
	s.mu.Lock()
	old := s.status
	switch {
	case err == nil:
		s.status.Err, s.status.Since = nil, time.Time{}
	case old.Err == nil:
		s.status.Err, s.status.Since = err, time.Now()
	default:
		s.status.Err = err // the same trouble, maybe in other words: keep since
	}
	st := s.status
	s.mu.Unlock()
	if errText(old.Err) != errText(st.Err) && s.cfg.OnChange != nil {
		s.cfg.OnChange(st)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// send sends the set when it may have changed and differs from the last one
// sent; the first is always sent, so the source counts as seen.
//
// A set with credentials reads them at every poll: a credential changed is a
// new Secret.
func (s *URL) send(ctx context.Context, out chan<- Update) error {
	if s.sent && !s.dirty && !s.good.credentials {
		return nil
	}
	objs, credProblems := fillCredentials(s.cfg.Credentials, s.good.objects)
	fp := s.fingerprint(objs, credProblems)
	if s.sent && fp == s.last {
		s.dirty = false
		return nil
	}
	u := s.update(objs, credProblems)
	select {
	case out <- u:
		s.sent, s.last, s.dirty = true, fp, false
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fingerprint says what an update would: the UIDs of the set with what
// each pod says (a manifest may keep its own uid while it changes), what
// each object says (objs: with their credentials' values), and the problems.
func (s *URL) fingerprint(objs []*objects.Object, credProblems []manifest.Problem) string {
	var b strings.Builder
	for _, p := range s.good.pods {
		b.WriteString(string(p.UID) + "/" + digest(p))
		b.WriteByte(' ')
	}
	for _, o := range objs {
		b.WriteString(o.Key() + "/" + objectDigest(o))
		b.WriteByte(' ')
	}
	b.WriteString(errText(s.problem()))
	for _, p := range credProblems {
		b.WriteString(" " + p.Err.Error())
	}
	return b.String()
}

// update is the good set, stamped with config.seen, its objects (objs:
// with their credentials' values), and the problems if any. A pod keeps its
// first config.seen time as long as it stays in the set.
func (s *URL) update(objs []*objects.Object, credProblems []manifest.Problem) Update {
	u := Update{Source: manifest.SourceHTTP, Pods: make([]manifest.Pod, 0, len(s.good.pods)), Objects: objs}
	seenAt := make(map[types.UID]time.Time, len(s.good.pods))
	for i, p := range s.good.pods {
		t, ok := s.seenAt[p.UID]
		if !ok {
			t = time.Now()
			if s.cfg.Seen != nil {
				t = s.cfg.Seen(p.UID)
			}
		}
		seenAt[p.UID] = t
		// Kept stamped: the next update hands the same pod again.
		p, _ = manifest.Stamped(p, t)
		s.good.pods[i].Pod = p.Pod
		u.Pods = append(u.Pods, p)
	}
	s.seenAt = seenAt
	if err := s.problem(); err != nil {
		u.Problems = []manifest.Problem{{Origin: s.origin, Err: err, Fetch: s.fetchErr != nil}}
	}
	u.Problems = append(u.Problems, credProblems...)
	return u
}

// DropDuplicates keeps the first of the pods of one list that share a full
// name and says which items were left out, as the kubelet's
// filterInvalidPods does (its FailedValidation event, here an error).
func DropDuplicates(pods []manifest.Pod) ([]manifest.Pod, error) {
	first := map[string]int{}
	kept := pods[:0:0]
	var errs []error
	for i, p := range pods {
		name := p.Namespace + "/" + p.Name
		if j, dup := first[name]; dup {
			errs = append(errs, &manifest.Error{Origin: p.Origin, Field: fmt.Sprintf("items[%d]", i),
				Reason: fmt.Sprintf("pod %s is items[%d] too; the first is used, as by the kubelet", name, j)})
			continue
		}
		first[name] = i
		kept = append(kept, p)
	}
	return kept, errors.Join(errs...)
}

// failureLog decides when a failure that lasts is logged: at once for each
// new cause, then again after 1m, 2m, 4m ... at most every hour, so a long
// outage stays visible in the journal without a line per poll. Causes that
// alternate are each logged once.
type failureLog struct {
	since  time.Time // of the first failure in a row
	count  int       // failures in a row
	causes map[string]*logTimes
}

type logTimes struct {
	next  time.Time // when the cause is logged again
	every time.Duration
}

const (
	failureLogFirst = time.Minute
	failureLogMax   = time.Hour
	// failureLogCauses bounds the causes remembered in one outage.
	failureLogCauses = 16
)

// fail counts a failure for reason at now and says whether to log it, and
// whether it is a reminder of a cause logged before.
func (f *failureLog) fail(reason string, now time.Time) (log, again bool) {
	if f.count == 0 {
		f.since = now
	}
	f.count++
	c := f.causes[reason]
	if c == nil {
		if f.causes == nil || len(f.causes) >= failureLogCauses {
			f.causes = map[string]*logTimes{}
		}
		f.causes[reason] = &logTimes{next: now.Add(failureLogFirst), every: failureLogFirst}
		return true, false
	}
	if now.Before(c.next) {
		return false, false
	}
	c.every = min(2*c.every, failureLogMax)
	c.next = now.Add(c.every)
	return true, true
}
