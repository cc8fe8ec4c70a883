package prober

import "sync"

// Health is what a container instance's probes said.
type Health struct {
	Started bool // no startup probe, or it passed
	Ready   bool // no readiness probe, or it passes
	// Failed is the probe (liveness or startup) that failed past its
	// threshold: the container is to be killed, and restarted unless the
	// restartPolicy is Never.
	Failed Kind
}

// Results is the results cache of one pod worker's probes (the kubelet's
// results.Manager): what the probes of each container instance said, by
// container ID. The Manager writes it from the probes' goroutines; the
// worker reads it when it plans and publishes status.
type Results struct {
	mu sync.Mutex // guards m
	m  map[string]*result
}

// result is one container instance's entry in the cache.
type result struct {
	Health
	last   map[Kind]Update
	podUID string // where its started and ready marks are kept
}

// NewResults returns an empty cache.
func NewResults() *Results { return &Results{m: map[string]*result{}} }

// Get returns what the probes of container id said, if it has an entry.
func (r *Results) Get(id string) (Health, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[id]
	if e == nil {
		return Health{}, false
	}
	return e.Health, true
}

// Last returns the last update of each probe of container id that has
// reported, startup, liveness then readiness.
func (r *Results) Last(id string) []Update {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[id]
	if e == nil {
		return nil
	}
	var out []Update
	for _, k := range []Kind{Startup, Liveness, Readiness} {
		if u, ok := e.last[k]; ok {
			out = append(out, u)
		}
	}
	return out
}

// add makes the entry of container id of pod podUID, unless it has one.
func (r *Results) add(id, podUID string, h Health) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[id] == nil {
		r.m[id] = &result{Health: h, last: map[Kind]Update{}, podUID: podUID}
	}
}

// set takes update u into the cache, and returns the pod of its container
// and the mark u sets or clears ("" for none); ok is false, and nothing is
// kept, for a container the cache does not have (any more).
func (r *Results) set(u Update) (podUID, mark string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.m[u.ContainerID]
	if e == nil {
		return "", "", false
	}
	e.last[u.Kind] = u
	switch u.Kind {
	case Startup:
		e.Started, mark = u.Result == Success, MarkStarted
	case Readiness:
		e.Ready, mark = u.Result == Success, MarkReady
	}
	if u.Result == Failure && (u.Kind == Liveness || u.Kind == Startup) {
		e.Failed = u.Kind
	}
	return e.podUID, mark, true
}

// prune drops the entries of the containers known reports not known, and
// returns them, container ID to pod UID.
func (r *Results) prune(known func(id string) bool) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone map[string]string
	for id, e := range r.m {
		if !known(id) {
			delete(r.m, id)
			if gone == nil {
				gone = map[string]string{}
			}
			gone[id] = e.podUID
		}
	}
	return gone
}
