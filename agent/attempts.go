package agent

import (
	"sync"
	"time"
)

// attemptsMemory is how long the attempts of a removed pod's containers are
// remembered: the kubelet's container GC, every minute, removes the dead
// containers of a deleted pod, and until then a pod of the same UID that
// comes back (a manifest rm'ed and written again) counts its restarts on
// from them.
const attemptsMemory = time.Minute

// removedAttempts remembers, for the pods removed in the last
// attemptsMemory, the attempt each container would start as next.
type removedAttempts struct {
	mu   sync.Mutex
	pods map[string]removedPod // by UID
}

type removedPod struct {
	at   time.Time
	next map[string]int // by container name
}

// remember records the next attempts of the pod uid, removed now.
func (r *removedAttempts) remember(uid string, next map[string]int, now time.Time) {
	if len(next) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for u, p := range r.pods {
		if now.Sub(p.at) >= attemptsMemory {
			delete(r.pods, u)
		}
	}
	if r.pods == nil {
		r.pods = map[string]removedPod{}
	}
	r.pods[uid] = removedPod{at: now, next: next}
}

// take returns and forgets the next attempts of the pod uid if it was
// removed less than attemptsMemory before now; nil otherwise.
func (r *removedAttempts) take(uid string, now time.Time) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	delete(r.pods, uid)
	if !ok || now.Sub(p.at) >= attemptsMemory {
		return nil
	}
	return p.next
}
