package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/images"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// fakePuller stands in for the image store's puller (oci/image, which agent/
// may not import): a pull brings the image into rt's store unless err says
// the registry fails.
type fakePuller struct {
	rt    *fakeRuntime
	mu    sync.Mutex
	err   error
	pulls []string
	// critical says, for each of pulls, whether it was a critical pod's.
	critical []bool
	secrets  [][]podspec.PullSecret // the pull secrets of each of pulls
	as       []string               // the name each of pulls is judged as
	block    chan struct{}          // if set, a pull waits for it (or its context)
	// blockOnly, if set, is the one image whose pulls wait for block.
	blockOnly string
	// movedTo, if set, is the image ID the pulled reference names right
	// after a pull returns: an import or another pull moved it meanwhile.
	movedTo string
}

func (p *fakePuller) Present(image string) (string, error) {
	p.rt.mu.Lock()
	defer p.rt.mu.Unlock()
	if p.rt.missing[image] {
		return "", nil
	}
	return p.rt.imageID(image), nil
}

func (p *fakePuller) Pull(ctx context.Context, image string, o images.PullOptions) (string, error) {
	progress := o.Progress
	p.mu.Lock()
	p.pulls = append(p.pulls, image)
	p.critical = append(p.critical, o.Critical)
	p.secrets = append(p.secrets, o.Secrets)
	p.as = append(p.as, o.As)
	err, block := p.err, p.block
	if p.blockOnly != "" && image != p.blockOnly {
		block = nil
	}
	p.mu.Unlock()
	if block != nil {
		if progress != nil {
			progress("1/2 layers")
		}
		select {
		case <-block:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		p.mu.Lock()
		err = p.err
		p.mu.Unlock()
	}
	if err != nil {
		return "", err
	}
	p.rt.mu.Lock()
	defer p.rt.mu.Unlock()
	delete(p.rt.missing, image)
	id := p.rt.imageID(image)
	if p.movedTo != "" {
		if p.rt.ids == nil {
			p.rt.ids = map[string]string{}
		}
		p.rt.ids[image] = p.movedTo
	}
	return id, nil
}

func (p *fakePuller) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pulls)
}

func (p *fakePuller) fail(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

// imagePullPolicy as the kubelet's EnsureImageExists: Never and a present
// image under IfNotPresent never pull; Always pulls at each start;
// IfNotPresent pulls a missing image.
func TestPullPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy  v1.PullPolicy
		missing bool
		pulls   int
		reason  string // waiting reason after the first sync; "" = running
	}{
		{v1.PullNever, true, 0, "ErrImageNeverPull"},
		{v1.PullNever, false, 0, ""},
		{v1.PullIfNotPresent, false, 0, ""},
		{v1.PullIfNotPresent, true, 1, ""},
		{v1.PullAlways, false, 1, ""},
		{v1.PullAlways, true, 1, ""},
	} {
		t.Run(string(tc.policy)+map[bool]string{true: "-missing", false: "-present"}[tc.missing], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				if tc.missing {
					rt.missing["app:v1"] = true
				}
				p := &fakePuller{rt: rt}
				h := start(t, rt, Config{Images: p})
				c := ctr("app", "app:v1")
				c.ImagePullPolicy = tc.policy
				h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, c)})
				if p.count() != tc.pulls {
					t.Errorf("%d pulls, want %d", p.count(), tc.pulls)
				}
				cs := h.pod("app").Status.ContainerStatuses[0]
				switch {
				case tc.reason == "" && cs.State.Running == nil:
					t.Errorf("state %+v, want running", cs.State)
				case tc.reason != "" && (cs.State.Waiting == nil || cs.State.Waiting.Reason != tc.reason):
					t.Errorf("state %+v, want waiting %s", cs.State, tc.reason)
				}
				if tc.reason == "ErrImageNeverPull" && !strings.Contains(cs.State.Waiting.Message, "pull policy of Never: pull it with `staticpodd images pull app:v1`") {
					t.Errorf("message %q", cs.State.Waiting.Message)
				}
			})
		})
	}
}

// A failed pull waits with ErrImagePull and the registry's error, then
// ImagePullBackOff for 10s, 20s..., and starts once the registry answers.
func TestPullBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["app:v1"] = true
		p := &fakePuller{rt: rt, err: errors.New("Get \"https://reg.example/v2/\": dial tcp: connection refused")}
		h := start(t, rt, Config{Images: p, SyncFrequency: time.Hour})
		c := ctr("app", "app:v1")
		c.ImagePullPolicy = v1.PullIfNotPresent
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, c)})
		waiting := func() *v1.ContainerStateWaiting { return h.pod("app").Status.ContainerStatuses[0].State.Waiting }
		// ErrImagePull until the worker's next sync, which may come at once.
		if w := waiting(); w == nil || (w.Reason != "ErrImagePull" && w.Reason != "ImagePullBackOff") || !strings.Contains(w.Message, "connection refused") {
			t.Fatalf("waiting = %+v, want ErrImagePull with the registry's error", w)
		}
		found := false
		for _, e := range h.a.Events().List() {
			found = found || e.Reason == "Failed" && strings.HasPrefix(e.Message, `Failed to pull image "app:v1": Get "https://reg.example/v2/"`)
		}
		if !found {
			t.Fatalf("no Failed event naming the image and the registry's error: %+v", h.a.Events().List())
		}
		h.a.Resync()
		synctest.Wait()
		if w := waiting(); w == nil || w.Reason != "ImagePullBackOff" ||
			w.Message != `Back-off pulling image "app:v1": ErrImagePull: Get "https://reg.example/v2/": dial tcp: connection refused` {
			t.Fatalf("waiting = %+v, want ImagePullBackOff with the last error", w)
		}
		if p.count() != 1 {
			t.Fatalf("%d pulls during the back-off, want 1", p.count())
		}
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if p.count() != 2 {
			t.Fatalf("%d pulls after 10s, want 2", p.count())
		}
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if p.count() != 2 {
			t.Fatalf("%d pulls 10s after the second failure, want still 2 (20s back-off)", p.count())
		}
		p.fail(nil)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if p.count() != 3 {
			t.Fatalf("%d pulls after 20s, want 3", p.count())
		}
		if cs := h.pod("app").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Fatalf("state %+v, want running once the pull worked", cs.State)
		}
	})
}

// A pull in progress shows in the container's waiting message.
func TestPullProgressInStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["app:v1"] = true
		p := &fakePuller{rt: rt, block: make(chan struct{})}
		h := start(t, rt, Config{Images: p})
		c := ctr("app", "app:v1")
		c.ImagePullPolicy = v1.PullIfNotPresent
		h.updates <- sourceUpdate(manifest.SourceFile, testPod("app", "u1", v1.RestartPolicyAlways, c))
		synctest.Wait()
		if w := h.pod("app").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" || w.Message != `Pulling image "app:v1": 1/2 layers` {
			t.Fatalf("waiting = %+v, want ContainerCreating with the pull's progress", w)
		}
		close(p.block)
		synctest.Wait()
		if cs := h.pod("app").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Fatalf("state %+v, want running", cs.State)
		}
	})
}

// A critical pod's pull is made as critical (the puller lets it pass every
// other pull), a plain pod's is not; the critical pod starts while the
// other's pull stalls, and the stalled pull's failure gives its pod the
// kubelet's ErrImagePull and then ImagePullBackOff.
func TestPullCriticalWhileAnotherStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["slow.example/app:v1"] = true
		rt.missing["fast.example/etcd:v1"] = true
		p := &fakePuller{rt: rt, block: make(chan struct{}), blockOnly: "slow.example/app:v1"}
		h := start(t, rt, Config{Images: p, SyncFrequency: time.Hour})
		app := testPod("app", "u1", v1.RestartPolicyAlways, ctr("app", "slow.example/app:v1"))
		etcd := testPod("etcd", "u2", v1.RestartPolicyAlways, ctr("etcd", "fast.example/etcd:v1"))
		etcd.Pod.Spec.PriorityClassName = "system-node-critical"
		h.send([]manifest.Pod{app, etcd})
		synctest.Wait()
		if cs := h.pod("etcd").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Fatalf("critical pod: state %+v, want running while the other pull stalls", cs.State)
		}
		if w := h.pod("app").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" {
			t.Fatalf("stalled pod: waiting %+v, want ContainerCreating", w)
		}
		p.mu.Lock()
		got := map[string]bool{}
		for i, img := range p.pulls {
			got[img] = p.critical[i]
		}
		p.mu.Unlock()
		if c, ok := got["fast.example/etcd:v1"]; !ok || !c {
			t.Errorf("the critical pod's pull: made %v, critical %v; want a critical pull", ok, c)
		}
		if c, ok := got["slow.example/app:v1"]; !ok || c {
			t.Errorf("the plain pod's pull: made %v, critical %v; want a non-critical pull", ok, c)
		}
		stall := "pull slow.example/app:v1: blob sha256:0123 from slow.example stalled after 6 of 124 bytes"
		p.fail(errors.New(stall))
		close(p.block)
		synctest.Wait()
		h.a.Resync()
		synctest.Wait()
		if w := h.pod("app").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ImagePullBackOff" || !strings.Contains(w.Message, "ErrImagePull: "+stall) {
			t.Fatalf("stalled pod: waiting %+v, want ImagePullBackOff with the stall", w)
		}
		if n := p.count(); n != 2 {
			t.Fatalf("%d pulls, want 2: no new pull of the stalled image during its back-off", n)
		}
	})
}

// A registry's error body comes back in the pull's error (the puller reads
// 64 KiB of one): the log line, the event and the waiting message hold a
// bounded part of it.
func TestPullErrorBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["app:v1"] = true
		p := &fakePuller{rt: rt}
		p.fail(errString("GET https://registry/v2/app/manifests/v1: unexpected status code 500: " + strings.Repeat("b", 64<<10)))
		h := start(t, rt, Config{Images: p})
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, ctr("app", "app:v1"))})
		w := h.pod("app").Status.ContainerStatuses[0].State.Waiting
		if w == nil || !strings.Contains(w.Message, "unexpected status code 500: bbb") {
			t.Fatalf("state %.200v, want waiting with the pull's error", w)
		}
		if len(w.Message) > podspec.MaxStatusMessage {
			t.Errorf("a waiting message of %d bytes", len(w.Message))
		}
		for _, line := range strings.Split(h.logs.String(), "\n") {
			if strings.Contains(line, "image pull failed") && len(line) > podspec.MaxOutput+512 {
				t.Errorf("a log line of %d bytes: %.120s", len(line), line)
			}
		}
		for _, ev := range h.a.events.List() {
			if len(ev.Message) > podspec.MaxEventMessage {
				t.Errorf("an event message of %d bytes", len(ev.Message))
			}
		}
	})
}

// The pull back-off starts over at 10s after a failure more than 10 minutes
// (2× its 5m cap) after the last one, and is forgotten with the pod UID it
// belongs to: a pod that comes back pulls at once.
func TestPullBackOffStartsOverAndIsForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["app:v1"] = true
		p := &fakePuller{rt: rt, err: errors.New("connection refused")}
		h := start(t, rt, Config{Images: p, SyncFrequency: time.Hour})
		c := ctr("app", "app:v1")
		c.ImagePullPolicy = v1.PullIfNotPresent
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, c)})
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if p.count() != 2 {
			t.Fatalf("%d pulls after 10s, want 2", p.count())
		}
		// The third pull, 20s later, hangs 11 minutes before it fails.
		block := make(chan struct{})
		p.mu.Lock()
		p.block = block
		p.mu.Unlock()
		time.Sleep(20*time.Second + time.Millisecond)
		synctest.Wait()
		if p.count() != 3 {
			t.Fatalf("%d pulls after 30s, want 3", p.count())
		}
		time.Sleep(11 * time.Minute)
		close(block)
		synctest.Wait()
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if p.count() != 4 {
			t.Fatalf("%d pulls 10s after a failure 11 minutes after the last, want 4 (back-off started over, not 40s)", p.count())
		}
		// In a 20s back-off now; another UID under the same name forgets it.
		other := ctr("app", "other:v1")
		other.ImagePullPolicy = v1.PullIfNotPresent
		h.send([]manifest.Pod{testPod("app", "u2", v1.RestartPolicyAlways, other)})
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, c)})
		if p.count() != 5 {
			t.Fatalf("%d pulls once u1 is back, want 5 (its back-off forgotten with it)", p.count())
		}
	})
}

// A pod's imagePullSecrets are looked up in the object set of the sources'
// latest updates, in its namespace, at each pull: a secret that arrives
// later is used by the next pull.
func TestPullWithPodSecrets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["reg.example/app:v1"] = true
		p := &fakePuller{rt: rt, err: errors.New("UNAUTHORIZED")}
		h := start(t, rt, Config{Images: p, SyncFrequency: time.Hour})
		c := ctr("app", "reg.example/app:v1")
		c.ImagePullPolicy = v1.PullIfNotPresent
		pod := testPod("app", "u1", v1.RestartPolicyAlways, c)
		pod.Pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
		h.updates <- sourceUpdate(manifest.SourceFile, pod)
		synctest.Wait()
		if p.count() != 1 || len(p.secrets[0]) != 0 {
			t.Fatalf("%d pulls, secrets %v; want one without secrets (none yet)", p.count(), p.secrets)
		}
		secret := &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
		secret.Namespace, secret.Name = pod.Pod.Namespace, "regcred"
		u := sourceUpdate(manifest.SourceFile, pod)
		u.Objects = []*objects.Object{{Source: manifest.SourceFile, Origin: "/etc/kubernetes/manifests/regcred.yaml", Secret: secret}}
		p.fail(nil)
		h.updates <- u
		synctest.Wait()
		time.Sleep(10*time.Second + time.Millisecond) // the pull back-off
		synctest.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.pulls) != 2 || len(p.secrets[1]) != 1 || p.secrets[1][0].Name != secret.Namespace+"/regcred" {
			t.Fatalf("%d pulls, secrets %v; want the second with %s/regcred", len(p.pulls), p.secrets, secret.Namespace)
		}
	})
}

// Verified means the image that runs: the container starts from the image
// its pull got (and the store verified), by ID, though its reference names
// another by the start (an import, a tag moved), and its status says so.
func TestStartsThePulledImage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["app:v1"] = true
		p := &fakePuller{rt: rt, movedTo: "sha256:moved"}
		h := start(t, rt, Config{Images: p})
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, ctr("app", "app:v1"))})
		cs := h.pod("app").Status.ContainerStatuses[0]
		if cs.State.Running == nil || cs.ImageID != "sha256:app:v1" {
			t.Fatalf("status %+v, imageID %q: want running the pulled image sha256:app:v1, not the moved reference's", cs.State, cs.ImageID)
		}
	})
}
