package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

// puller is a store, with the image when present, and a registry that
// answers err.
type puller struct {
	err     error
	pulls   int
	present bool
	last    PullOptions
}

func (p *puller) Present(image string) (string, error) {
	if !p.present {
		return "", nil
	}
	return "sha256:" + image, nil
}

func (p *puller) Pull(ctx context.Context, image string, o PullOptions) (string, error) {
	p.pulls++
	p.last = o
	if p.err != nil {
		return "", p.err
	}
	return "sha256:" + image, nil
}

// A failed pull waits ErrImagePull until its back-off ends, ImagePullBackOff
// with the last error meanwhile, 10s doubling; Forget starts the pod's
// back-off over.
func TestEnsureBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &puller{err: errors.New("registry says no")}
		never := func() <-chan struct{} { return nil }
		m := NewManager(p, events.New("node1", 100, slog.New(slog.DiscardHandler)), never, slog.New(slog.DiscardHandler))
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "web", "default", "u1"
		c := &v1.Container{Name: "app", Image: "example.com/app:1", ImagePullPolicy: v1.PullIfNotPresent}
		var reason, message string
		req := Request{Pod: pod, Container: c, Image: c.Image,
			Waiting: func(r, msg string) { reason, message = r, msg }, Publish: func() {}}
		t0 := time.Now()
		_, ok, retry := m.Ensure(t.Context(), req)
		if ok || reason != status.ErrImagePull || message != "registry says no" || retry.Sub(t0) != 10*time.Second {
			t.Fatalf("first failure: ok %v, %s %q, retry in %v", ok, reason, message, retry.Sub(t0))
		}
		time.Sleep(5 * time.Second)
		_, ok, retry = m.Ensure(t.Context(), req)
		if ok || p.pulls != 1 || reason != status.ImagePullBackOff || !strings.HasSuffix(message, ": ErrImagePull: registry says no") || retry.Sub(t0) != 10*time.Second {
			t.Fatalf("in back-off: ok %v, %d pulls, %s %q, retry at %v", ok, p.pulls, reason, message, retry.Sub(t0))
		}
		time.Sleep(5 * time.Second)
		if _, _, retry = m.Ensure(t.Context(), req); p.pulls != 2 || retry.Sub(time.Now()) != 20*time.Second {
			t.Fatalf("second failure: %d pulls, next in %v, want 2 and 20s", p.pulls, retry.Sub(time.Now()))
		}
		m.Forget("u1")
		p.err = nil
		req.First = true // never ran: waits ContainerCreating during the pull, nothing after
		if e, ok, _ := m.Ensure(t.Context(), req); !ok || !e.Pulled || e.ImageID != "sha256:example.com/app:1" || p.pulls != 3 || reason != "" {
			t.Fatalf("after Forget: ok %v, %+v, %d pulls, reason %q; want the pulled image's ID", ok, e, p.pulls, reason)
		}
	})
}

// An air-gapped node: nginx:latest was imported, its policy is Always (the
// kubelet's default for :latest), the registry cannot be reached. The
// kubelet's behaviour is kept (it pulls, fails, backs off), and the failure
// says the image is there and names the fix; with the image absent, or
// another policy, the message is the registry's alone.
func TestEnsureAlwaysImagePresentSaysSo(t *testing.T) {
	for _, tc := range []struct {
		policy  v1.PullPolicy
		present bool
		hint    bool
	}{
		{v1.PullAlways, true, true},
		{v1.PullAlways, false, false},
		{v1.PullIfNotPresent, false, false},
	} {
		p := &puller{err: errors.New(`Get "https://index.docker.io/v2/": dial tcp: lookup index.docker.io: no such host`), present: tc.present}
		never := func() <-chan struct{} { return nil }
		rec := events.New("node1", 100, slog.New(slog.DiscardHandler))
		m := NewManager(p, rec, never, slog.New(slog.DiscardHandler))
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "web", "default", "u1"
		c := &v1.Container{Name: "app", Image: "nginx:latest", ImagePullPolicy: tc.policy}
		var reason, message string
		req := Request{Pod: pod, Container: c, Image: "docker.io/library/nginx:latest",
			Waiting: func(r, msg string) { reason, message = r, msg }, Publish: func() {}}
		if _, ok, _ := m.Ensure(t.Context(), req); ok || p.pulls != 1 || reason != status.ErrImagePull {
			t.Fatalf("%s, present %v: ok %v, %d pulls, reason %s: want the pull tried and failed", tc.policy, tc.present, ok, p.pulls, reason)
		}
		const fix = `the image "nginx:latest" is in the node's image store, but imagePullPolicy Always ` +
			`(the default for an image tagged :latest or untagged) pulls it every start: set imagePullPolicy: IfNotPresent`
		var failed string
		for _, e := range rec.List() {
			if e.Reason == events.Failed && strings.HasPrefix(e.Message, "Failed to pull image") {
				failed = e.Message
			}
		}
		if got := strings.Contains(failed, fix) && strings.Contains(message, fix); got != tc.hint {
			t.Errorf("%s, present %v: event %q, waiting message %q: hint shown %v, want %v", tc.policy, tc.present, failed, message, got, tc.hint)
		}
		if !strings.Contains(failed, "no such host") {
			t.Errorf("event %q lacks the registry's error", failed)
		}
	}
}

// A pod's imagePullSecrets are looked up in its namespace and handed to the
// pull in its order, dockerconfigjson and dockercfg alike; a Secret of
// another type is passed over, a missing one named in the event the kubelet
// records when the pull fails.
func TestEnsurePullSecrets(t *testing.T) {
	p := &puller{err: errors.New("UNAUTHORIZED")}
	rec := events.New("node1", 100, slog.New(slog.DiscardHandler))
	m := NewManager(p, rec, func() <-chan struct{} { return nil }, slog.New(slog.DiscardHandler))
	secret := func(ns, name string, typ v1.SecretType, key string) *v1.Secret {
		s := &v1.Secret{Type: typ, Data: map[string][]byte{key: []byte(name + "-config")}}
		s.Namespace, s.Name = ns, name
		return s
	}
	have := map[string]*v1.Secret{
		"kube-system/json":   secret("kube-system", "json", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey),
		"kube-system/legacy": secret("kube-system", "legacy", v1.SecretTypeDockercfg, v1.DockerConfigKey),
		"kube-system/opaque": secret("kube-system", "opaque", v1.SecretTypeOpaque, v1.DockerConfigJsonKey),
		"default/elsewhere":  secret("default", "elsewhere", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey),
	}
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "kube-system", "u1"
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "legacy"}, {Name: ""}, {Name: "missing"}, {Name: "opaque"}, {Name: "elsewhere"}, {Name: "json"}}
	c := &v1.Container{Name: "app", Image: "example.com/app:1", ImagePullPolicy: v1.PullIfNotPresent}
	m.Ensure(t.Context(), Request{Pod: pod, Container: c, Image: c.Image, Waiting: func(string, string) {}, Publish: func() {},
		Secret: func(ns, name string) *v1.Secret { return have[ns+"/"+name] }})
	got := p.last.Secrets
	if len(got) != 2 || got[0].Name != "kube-system/legacy" || !got[0].Legacy || string(got[0].Config) != "legacy-config" ||
		got[1].Name != "kube-system/json" || got[1].Legacy || string(got[1].Config) != "json-config" {
		t.Fatalf("pull secrets %v, want kube-system/legacy (dockercfg) then kube-system/json", got)
	}
	var found bool
	for _, ev := range rec.List() {
		if ev.Reason == events.FailedToRetrieveImagePullSecret {
			found = true
			if want := "Unable to retrieve some image pull secrets (missing, elsewhere); attempting to pull the image may not succeed."; ev.Message != want {
				t.Errorf("event %q, want %q", ev.Message, want)
			}
		}
	}
	if !found {
		t.Errorf("no %s event after a failed pull: %v", events.FailedToRetrieveImagePullSecret, rec.List())
	}
}

// A pod naming thousands of missing pull secrets gets one bounded event.
func TestEnsureMissingPullSecretsBounded(t *testing.T) {
	p := &puller{err: errors.New("UNAUTHORIZED")}
	rec := events.New("node1", 100, slog.New(slog.DiscardHandler))
	m := NewManager(p, rec, func() <-chan struct{} { return nil }, slog.New(slog.DiscardHandler))
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "kube-system", "u1"
	for i := range 5000 {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: fmt.Sprintf("s%0250d", i)})
	}
	c := &v1.Container{Name: "app", Image: "example.com/app:1", ImagePullPolicy: v1.PullIfNotPresent}
	m.Ensure(t.Context(), Request{Pod: pod, Container: c, Image: c.Image, Waiting: func(string, string) {}, Publish: func() {}})
	for _, ev := range rec.List() {
		if ev.Reason == events.FailedToRetrieveImagePullSecret && len(ev.Message) > 12<<10 {
			t.Errorf("event of %d bytes", len(ev.Message))
		}
	}
}

// A pull the image policy refuses ("SignatureValidationFailed: …", the CRI's
// error) waits SignatureValidationFailed with the kubelet's message
// (evalCRIPullErr), records the kubelet's Failed events, and backs off as
// ErrImagePull does, the back-off's message carrying the reason.
func TestEnsureSignatureValidationFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &puller{err: errors.New(`SignatureValidationFailed: image docker.io/library/nginx@sha256:0123: no signature by key cosign.pub`)}
		rec := events.New("node1", 100, slog.New(slog.DiscardHandler))
		m := NewManager(p, rec, func() <-chan struct{} { return nil }, slog.New(slog.DiscardHandler))
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "web", "default", "u1"
		c := &v1.Container{Name: "app", Image: "nginx:1.27", ImagePullPolicy: v1.PullIfNotPresent}
		var reason, message string
		req := Request{Pod: pod, Container: c, Image: "docker.io/library/nginx:1.27",
			Waiting: func(r, msg string) { reason, message = r, msg }, Publish: func() {}}
		t0 := time.Now()
		_, ok, retry := m.Ensure(t.Context(), req)
		const want = `image pull failed for nginx:1.27 because the signature validation failed: image docker.io/library/nginx@sha256:0123: no signature by key cosign.pub`
		if ok || reason != status.SignatureValidationFailed || message != want || retry.Sub(t0) != 10*time.Second {
			t.Fatalf("refused: ok %v, %s %q, retry in %v; want SignatureValidationFailed %q in 10s", ok, reason, message, retry.Sub(t0), want)
		}
		var got []string
		for _, e := range rec.List() {
			if e.Type == v1.EventTypeWarning {
				got = append(got, e.Reason+" "+e.Message)
			}
		}
		wantEvents := []string{
			`Failed Failed to pull image "nginx:1.27": SignatureValidationFailed: image docker.io/library/nginx@sha256:0123: no signature by key cosign.pub`,
			"Failed Error: SignatureValidationFailed",
		}
		if !slices.Equal(got, wantEvents) {
			t.Errorf("warning events %q, want %q", got, wantEvents)
		}
		time.Sleep(5 * time.Second)
		if _, ok, _ = m.Ensure(t.Context(), req); ok || p.pulls != 1 || reason != status.ImagePullBackOff ||
			message != `Back-off pulling image "nginx:1.27": SignatureValidationFailed: `+want {
			t.Fatalf("in back-off: ok %v, %d pulls, %s %q", ok, p.pulls, reason, message)
		}
	})
}

// An image in the store that the policy refuses at the container's start
// (the runtime's podspec.ErrImageRefused) waits as a refused pull does, and
// its retries follow the pull back-off.
func TestRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := events.New("node1", 100, slog.New(slog.DiscardHandler))
		m := NewManager(&puller{present: true}, rec, func() <-chan struct{} { return nil }, slog.New(slog.DiscardHandler))
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "web", "default", "u1"
		c := &v1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: v1.PullIfNotPresent}
		var reason, message string
		req := Request{Pod: pod, Container: c, Image: c.Image,
			Waiting: func(r, msg string) { reason, message = r, msg }, Publish: func() {}}
		err := fmt.Errorf("start container app (c1) of pod web: %w: %s: %w", podspec.ErrImageRefused, c.Image,
			errors.New("SignatureValidationFailed: oci-archive transport: reject"))
		t0 := time.Now()
		if retry := m.Refused(req, err); retry.Sub(t0) != 10*time.Second {
			t.Errorf("first refusal: retry in %v, want 10s", retry.Sub(t0))
		}
		const want = "image pull failed for registry.k8s.io/pause:3.10 because the signature validation failed: oci-archive transport: reject"
		if reason != status.SignatureValidationFailed || message != want {
			t.Errorf("waiting %s %q, want SignatureValidationFailed %q", reason, message, want)
		}
		evs := rec.List()
		if len(evs) != 2 || evs[0].Reason != events.Failed || evs[0].Message != want || evs[1].Message != "Error: SignatureValidationFailed" {
			t.Errorf("events %+v", evs)
		}
		time.Sleep(10 * time.Second)
		if retry := m.Refused(req, err); retry.Sub(time.Now()) != 20*time.Second {
			t.Errorf("second refusal: retry in %v, want 20s", retry.Sub(time.Now()))
		}
	})
}

// A start the image policy refused waits out its back-off whatever wakes
// the worker, but a Resync (a reload, which may have fixed the policy, or
// an import) has it try again at once, as every waiting pod does.
func TestRefusedTriesAgainAtResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		resynced := make(chan struct{})
		m := NewManager(&puller{present: true}, events.New("node1", 100, slog.New(slog.DiscardHandler)),
			func() <-chan struct{} { return resynced }, slog.New(slog.DiscardHandler))
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "web", "default", "u1"
		c := &v1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: v1.PullIfNotPresent}
		req := Request{Pod: pod, Container: c, Image: c.Image, Waiting: func(string, string) {}, Publish: func() {}}
		err := fmt.Errorf("%w: %s: %w", podspec.ErrImageRefused, c.Image, errors.New("SignatureValidationFailed: reject"))
		m.Refused(req, err)
		if _, ok, _ := m.Ensure(t.Context(), req); ok {
			t.Fatal("a refused start tried again before its back-off ended")
		}
		close(resynced)
		resynced = make(chan struct{})
		if _, ok, retry := m.Ensure(t.Context(), req); !ok {
			t.Fatalf("a refused start waits after a resync, until %v", retry)
		}
		// Refused again: it waits again, until the next resync.
		m.Refused(req, err)
		if _, ok, _ := m.Ensure(t.Context(), req); ok {
			t.Fatal("a start refused again after a resync tried again at once")
		}
	})
}
