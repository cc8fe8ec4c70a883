package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestImageMissingWaitsThenResyncStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["etcd:3.5"] = true
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("etcd", "u1", v1.RestartPolicyAlways, ctr("etcd", "etcd:3.5"))})
		cs := h.pod("etcd").Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w == nil || w.Reason != "ErrImageNeverPull" || !strings.Contains(w.Message, `"etcd:3.5"`) {
			t.Fatalf("state = %+v, want waiting ErrImageNeverPull naming the image", cs.State)
		}
		if s := h.a.Summary(); s != "1 pod: 1 waiting (etcd: ErrImageNeverPull)" {
			t.Errorf("Summary() = %q", s)
		}
		if r, _, _ := h.n.snapshot(); r != 1 {
			t.Errorf("Ready = %d, want 1: a start that was attempted counts", r)
		}
		rt.mu.Lock()
		delete(rt.missing, "etcd:3.5")
		rt.mu.Unlock()
		h.a.Resync()
		synctest.Wait()
		if cs := h.pod("etcd").Status.ContainerStatuses[0]; cs.State.Running == nil || cs.RestartCount != 0 {
			t.Fatalf("after Resync state = %+v restarts %d, want running, 0 restarts", cs.State, cs.RestartCount)
		}
	})
}

func TestImageMissingRetriedEverySyncFrequency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["etcd:3.5"] = true
		h := start(t, rt, Config{SyncFrequency: 30 * time.Second})
		h.send([]manifest.Pod{testPod("etcd", "u1", v1.RestartPolicyAlways, ctr("etcd", "etcd:3.5"))})
		rt.mu.Lock()
		delete(rt.missing, "etcd:3.5")
		rt.mu.Unlock()
		// The sync ticks at the multiples of its period on the daemon's
		// shared clock (agent/tick): the next is within one period.
		synctest.Wait()
		if len(rt.Running()) != 0 {
			t.Fatal("started before the sync tick")
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if len(rt.Running()) != 1 {
			t.Fatalf("not started on the sync tick; calls %q", rt.Calls())
		}
	})
}

// An image in the store that the image policy refuses at the start (the
// runtime's ErrImageRefused) waits SignatureValidationFailed with the
// kubelet's message, not a generic start error, and is tried again after the
// pull back-off: at 0s, 10s, 30s; once the policy accepts it, it runs.
func TestImageRefusedAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.startErr = fmt.Errorf("start container a (c1) of pod web: %w: docker.io/library/busybox:latest: %w", podspec.ErrImageRefused,
			errString("SignatureValidationFailed: oci-archive transport: refused by the policy (reject)"))
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		cs := h.pod("web").Status.ContainerStatuses[0]
		const want = "image pull failed for busybox because the signature validation failed: oci-archive transport: refused by the policy (reject)"
		if w := cs.State.Waiting; w == nil || w.Reason != "SignatureValidationFailed" || w.Message != want {
			t.Fatalf("state = %+v, want SignatureValidationFailed %q", cs.State, want)
		}
		var failed []string
		for _, e := range h.a.events.List() {
			if e.Type == v1.EventTypeWarning {
				failed = append(failed, e.Reason+": "+e.Message)
			}
		}
		if !slices.Equal(failed, []string{"Failed: " + want, "Failed: Error: SignatureValidationFailed"}) {
			t.Errorf("warning events %q", failed)
		}
		time.Sleep(35 * time.Second)
		if got := len(rt.Calls("start-failed")); got != 3 {
			t.Errorf("%d refused starts in 35s, want 3 (0s, 10s, 30s)", got)
		}
		rt.mu.Lock()
		rt.startErr = nil
		rt.mu.Unlock()
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if len(rt.Running()) != 1 {
			t.Errorf("not running once the policy accepts the image; calls %q", rt.Calls())
		}
	})
}

// While a crash-looping container waits for its image, its back-off does not
// grow: once the image is back it starts as soon as the back-off it had allows.
func TestBackOffDoesNotGrowWhileImageIsMissing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{SyncFrequency: time.Second})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		id := func() string {
			return strings.TrimPrefix(h.pod("web").Status.ContainerStatuses[0].ContainerID, containerIDPrefix)
		}
		rt.Exit(id(), 1) // restarted at once
		synctest.Wait()
		rt.mu.Lock()
		rt.missing["busybox"] = true
		rt.mu.Unlock()
		rt.Exit(id(), 1) // back-off 10s, then the image is missing
		synctest.Wait()
		time.Sleep(2 * time.Minute) // a retry every SyncFrequency
		synctest.Wait()
		rt.mu.Lock()
		delete(rt.missing, "busybox")
		rt.mu.Unlock()
		h.a.Resync()
		synctest.Wait()
		if cs := h.pod("web").Status.ContainerStatuses[0]; cs.State.Running == nil || cs.RestartCount != 2 {
			t.Fatalf("after the image came back: state %+v, restarts %d; want running at once, 2 restarts", cs.State, cs.RestartCount)
		}
	})
}

// A missing image waits with the pod's own pull policy, since no policy
// makes staticpodd pull, and says how to bring the image in.
func TestImageMissingNamesPolicyAndImport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["etcd:3.5"] = true
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: "/srv/spd"}})
		c := ctr("etcd", "etcd:3.5")
		c.ImagePullPolicy = v1.PullIfNotPresent
		h.send([]manifest.Pod{testPod("etcd", "u1", v1.RestartPolicyAlways, c)})
		want := "Container image \"etcd:3.5\" is not present with pull policy of IfNotPresent, and staticpodd does not pull images: " +
			"import it with `staticpodd images import --root-dir /srv/spd FILE`, or copy the image archive into /srv/spd/images/import/"
		if w := h.pod("etcd").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ErrImageNeverPull" || w.Message != want {
			t.Errorf("waiting = %+v\nwant message %q", w, want)
		}
	})
}

// The message names the daemon's default root dir without a flag.
func TestImageMissingMessageDefaultRoot(t *testing.T) {
	w := &worker{a: &Agent{cfg: Config{Paths: manifest.Paths{RootDir: "/var/lib/staticpodd"}}}}
	c := ctr("web", "busybox:latest")
	c.ImagePullPolicy = v1.PullAlways
	got := w.imageMissing(&c)
	if !strings.Contains(got, "pull policy of Always") || !strings.Contains(got, "`staticpodd images import FILE`") ||
		!strings.Contains(got, "/var/lib/staticpodd/images/import/") {
		t.Errorf("message %q", got)
	}
}
