package prober

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The marks that keep what a running container's probes said across daemon
// restarts.
const (
	MarkStarted = "started"
	MarkReady   = "ready"
)

// Marks remember, across daemon restarts, which running containers' startup
// probe has passed and which are ready: a mark is set when the result turns
// to success and cleared when it turns to failure or the container goes.
// Containers are named by pod UID and container ID.
type Marks interface {
	Set(uid, id, mark string, on bool) error
	Marked(uid, id, mark string) bool
}

// FileMarks keeps probe marks as empty files in the pod's directory, which
// go with it.
type FileMarks struct {
	File func(uid, id, mark string) string // where a mark lives (agent/poddir's ProbeMark)
}

func (m FileMarks) file(uid, id, mark string) string {
	return m.File(uid, id, mark)
}

func (m FileMarks) Set(uid, id, mark string, on bool) error {
	if uid == "" || id == "" || strings.ContainsAny(uid+id, "/.") {
		return nil
	}
	f := m.file(uid, id, mark)
	if !on {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return err
	}
	return os.WriteFile(f, nil, 0o600)
}

func (m FileMarks) Marked(uid, id, mark string) bool {
	if uid == "" || id == "" || strings.ContainsAny(uid+id, "/.") {
		return false
	}
	_, err := os.Lstat(m.file(uid, id, mark))
	return err == nil
}

// NoMarks remembers nothing: without a root dir a daemon restart makes
// probed containers unready until their probes pass again.
type NoMarks struct{}

func (NoMarks) Set(string, string, string, bool) error { return nil }
func (NoMarks) Marked(string, string, string) bool     { return false }

// Counts counts the probes made, by CountKey, for the prober_probe_total
// counter. Its zero value is ready to use.
type Counts struct {
	mu sync.Mutex // guards n
	n  map[CountKey]uint64
}

// Add counts one probe.
func (c *Counts) Add(k CountKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[CountKey]uint64{}
	}
	c.n[k]++
}

// Snapshot returns the counts of the pods whose UID has says are still there,
// and drops the series of the others, as the kubelet deletes a pod's prober
// series when it removes the pod's probe workers.
func (c *Counts) Snapshot(has func(uid string) bool) map[CountKey]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[CountKey]uint64, len(c.n))
	for k, v := range c.n {
		if !has(k.UID) {
			delete(c.n, k) // the pod is gone: its series go with it
			continue
		}
		out[k] = v
	}
	return out
}
