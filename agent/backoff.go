package agent

import (
	"time"
)

// Crash-loop back-off as the kubelet does it (client-go flowcontrol.Backoff, keyed
// in kuberuntime by pod, container name and spec hash): the first restart is
// immediate, then each restart waits 10s, 20s, 40s... up to max since the last
// exit. An entry renewed (at the exit a restart follows, or at a failed start)
// more than 10 minutes before the next exit is forgotten (kubelet
// HasExpiredFunc), so a container that ran that long starts over at 10s.
//
// It is not flowcontrol.Backoff (which the image pull back-off uses) because
// it differs in one way a user sees: an entry is stamped with the exit the
// restart follows (next(key, exit)), where flowcontrol's Next stamps the time
// of the restart. So here the 10 minutes run from the last exit and include
// the back-off wait: at the 5m cap, a container that runs 6 minutes restarts
// at once; with the kubelet's it waits 5m again.
const (
	backoffInitial    = 10 * time.Second
	defaultBackoffMax = 5 * time.Minute
	backoffReset      = 10 * time.Minute
)

type backoff struct {
	initial, max time.Duration
	entries      map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

func newBackoff(initial, max time.Duration) *backoff {
	return &backoff{initial: initial, max: max, entries: map[string]*backoffEntry{}}
}

func backoffKey(podUID, container, hash string) string {
	return podUID + "_" + container + "_" + hash
}

// expired reports whether the entry was last renewed more than backoffReset
// before at.
func (b *backoff) expired(e *backoffEntry, at time.Time) bool {
	return at.Sub(e.lastUpdate) > backoffReset
}

// next records a restart for key after an exit (or failed start) at `at`, growing
// the delay the next exit will have to wait.
func (b *backoff) next(key string, at time.Time) {
	e := b.entries[key]
	if e == nil || b.expired(e, at) {
		b.entries[key] = &backoffEntry{delay: b.initial, lastUpdate: at}
		return
	}
	e.delay = min(2*e.delay, b.max)
	e.lastUpdate = at
}

// wait reports how long a restart of key after an exit at `at` must still wait at
// now: the end of the back-off and its length, or a zero time when it may go now.
func (b *backoff) wait(key string, at, now time.Time) (time.Time, time.Duration) {
	e := b.entries[key]
	if e == nil || b.expired(e, at) {
		return time.Time{}, 0
	}
	if now.Sub(at) < e.delay {
		return at.Add(e.delay), e.delay
	}
	return time.Time{}, 0
}

// forget drops every entry of a pod.
func (b *backoff) forget(podUID string) {
	for k := range b.entries {
		if len(k) > len(podUID) && k[:len(podUID)+1] == podUID+"_" {
			delete(b.entries, k)
		}
	}
}
