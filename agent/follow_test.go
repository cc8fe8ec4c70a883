package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/rollout"
)

func followPods(t *testing.T, doc string) map[string]manifest.Pod {
	t.Helper()
	p := manifest.Check([]byte(doc), manifest.SourceFile, "/m/web.yaml", "node1")
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	return map[string]manifest.Pod{"default/web-node1": p.Pods[0]}
}

const followDoc = `apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {staticpodd.io/follow-tags: 1h}
spec:
  initContainers:
  - {name: init, image: "reg.example/init@sha256:0000000000000000000000000000000000000000000000000000000000000000"}
  containers:
  - {name: main, image: reg.example/team/app:v1}
`

// A followed tag's digest that moved runs by digest, in a generation of
// its own, kept on disk; back at its base digest the pod is the manifest's.
func TestFollowsApply(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	root := t.TempDir()
	f := loadFollows(root, logger)
	pods := followPods(t, followDoc)
	orig := pods["default/web-node1"].UID
	f.apply(pods, true, logger)
	if pods["default/web-node1"].UID != orig {
		t.Fatal("a pod with no digest followed yet changed")
	}
	if fp := f.tags["default/web-node1"]; len(fp.tags) != 1 || fp.tags["main"] != "reg.example/team/app:v1" {
		t.Fatalf("followed tags %v: the image by digest follows nothing", fp.tags)
	}
	const base, moved = "reg.example/team/app@sha256:aa", "reg.example/team/app@sha256:bb"
	f.at["default/web-node1"] = &followed{Base: map[string]string{"main": base}, Now: map[string]string{"main": moved},
		Tag: map[string]string{"main": "reg.example/team/app:v1"}}
	if err := f.saveLocked(); err != nil {
		t.Fatal(err)
	}
	// Read back from disk, as by the next daemon.
	f = loadFollows(root, logger)
	pods = followPods(t, followDoc)
	f.apply(pods, true, logger)
	p := pods["default/web-node1"]
	if p.UID == orig || p.Pod.Spec.Containers[0].Image != moved || p.Pod.Spec.InitContainers[0].Image[:17] != "reg.example/init@" {
		t.Fatalf("moved: UID %s (manifest's %s), images %s, %s", p.UID, orig, p.Pod.Spec.Containers[0].Image, p.Pod.Spec.InitContainers[0].Image)
	}
	if manifest.ManifestUID(p.Pod) != string(orig) {
		t.Errorf("the generation does not name its manifest's UID")
	}
	// A digest of another repository (the manifest names another image
	// now) is not run.
	f.at["default/web-node1"].Now["main"] = "reg.example/other@sha256:cc"
	pods = followPods(t, followDoc)
	f.apply(pods, true, logger)
	if pods["default/web-node1"].UID != orig {
		t.Errorf("a digest of another repository was run")
	}
	// An edit to another tag of the repository does not run the old
	// tag's digest.
	f.at["default/web-node1"].Now["main"] = moved
	pods = followPods(t, strings.Replace(followDoc, "app:v1", "app:v2", 1))
	edited := pods["default/web-node1"].UID
	f.apply(pods, true, logger)
	if p := pods["default/web-node1"]; p.UID != edited || p.Pod.Spec.Containers[0].Image != "reg.example/team/app:v2" {
		t.Errorf("an edit to tag v2 runs %s", p.Pod.Spec.Containers[0].Image)
	}
	// The pod gone from a complete set: its digests are forgotten, on disk too.
	f.apply(map[string]manifest.Pod{}, true, logger)
	if len(loadFollows(root, logger).at) != 0 {
		t.Errorf("a removed pod's digests are kept")
	}
}

// The generation a rollback brings back runs the digests it ran, which its
// tags may name no longer; a pod that follows nothing runs its manifest.
func TestRunDigests(t *testing.T) {
	ran := map[string]string{"main": "reg.example/team/app@sha256:aa", "init": "reg.example/other@sha256:bb"}
	p := followPods(t, followDoc)["default/web-node1"].Pod
	runDigests(p, ran)
	if p.Spec.Containers[0].Image != ran["main"] || p.Spec.InitContainers[0].Image == ran["init"] {
		t.Errorf("images %s, %s", p.Spec.Containers[0].Image, p.Spec.InitContainers[0].Image)
	}
	p = followPods(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: main, image: reg.example/team/app:v1}\n")["default/web-node1"].Pod
	runDigests(p, ran)
	if p.Spec.Containers[0].Image != "reg.example/team/app:v1" {
		t.Errorf("a pod that follows nothing runs %s", p.Spec.Containers[0].Image)
	}
}

// Image GC keeps the images of every kept generation, which a rollback
// runs again.
func TestKeptImages(t *testing.T) {
	r := newRollouts("")
	r.byKey["default/web-node1"] = &rollout.History{Namespace: "default", Name: "web-node1", Generations: []rollout.Generation{
		{UID: "a", Images: map[string]string{"main": "reg.example/team/app@sha256:aa"}},
		{UID: "b", Images: map[string]string{"main": "reg.example/team/app@sha256:bb"}},
	}}
	got := r.keptImages()
	slices.Sort(got)
	if !slices.Equal(got, []string{"reg.example/team/app@sha256:aa", "reg.example/team/app@sha256:bb"}) {
		t.Errorf("kept images %v", got)
	}
}

// follow.json is read as the rollout histories are: a FIFO in its place
// does not hold the daemon's start waiting for a writer, and a file larger
// than the digests could be is refused, not read whole.
func TestLoadFollowsHostileFile(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Run("fifo", func(t *testing.T) {
		root := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(root, followFile), 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan *follows, 1)
		go func() { done <- loadFollows(root, logger) }()
		select {
		case f := <-done:
			if len(f.at) != 0 {
				t.Fatalf("digests from a FIFO: %v", f.at)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("loadFollows waits on a FIFO in place of follow.json")
		}
	})
	t.Run("large", func(t *testing.T) {
		root := t.TempDir()
		// Valid JSON, all of it whitespace past the bound.
		b := append(bytes.Repeat([]byte(" "), maxFollowFile), "{}"...)
		if err := os.WriteFile(filepath.Join(root, followFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		f := loadFollows(root, slog.New(slog.NewTextHandler(&logs, nil)))
		if len(f.at) != 0 || !strings.Contains(logs.String(), "larger than") {
			t.Fatalf("a follow.json past %d bytes read: %v; logs: %s", maxFollowFile, f.at, logs.String())
		}
	})
}

// countingResolver names one digest for every tag and counts the asks.
type countingResolver struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *countingResolver) Resolve(_ context.Context, image string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[image]++
	return "", errors.New("registry down")
}

// A pod whose many containers follow the same tag asks the registry once
// per check, not once per container: a manifest of many containers at the
// shortest interval does not multiply the requests, nor the events.
func TestFollowAsksEachTagOncePerCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		res := &countingResolver{calls: map[string]int{}}
		h := start(t, rt, Config{Tags: res})
		p := testPod("web", "u1", v1.RestartPolicyAlways,
			ctr("a", "reg.example/app:v1", "sleep"), ctr("b", "reg.example/app:v1", "sleep"), ctr("c", "reg.example/app:v1", "sleep"))
		p.Pod.Annotations = map[string]string{manifest.AnnotationFollowTags: "1m"}
		h.send([]manifest.Pod{p})
		time.Sleep(30 * time.Second)
		synctest.Wait()
		res.mu.Lock()
		defer res.mu.Unlock()
		if n := res.calls["reg.example/app:v1"]; n != 1 {
			t.Fatalf("the tag of 3 containers was asked %d times in one check, want 1", n)
		}
	})
}

// movingResolver names, for every tag, the digest to.
type movingResolver struct{ to string }

func (r movingResolver) Resolve(context.Context, string) (string, error) { return r.to, nil }

// The new digest of a followed tag is pulled by digest but judged by the
// image policy as the tag the pod names: a signature for another tag of
// the repository must not let it in.
func TestFollowPullsJudgedAsTheTag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		p := &fakePuller{rt: rt}
		moved := "reg.example/app@sha256:" + strings.Repeat("b", 64)
		h := start(t, rt, Config{Images: p, Tags: movingResolver{to: moved}})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "reg.example/app:v1", "sleep"))
		pod.Pod.Annotations = map[string]string{manifest.AnnotationFollowTags: "1m"}
		h.send([]manifest.Pod{pod})
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		i := slices.Index(p.pulls, moved)
		if i < 0 {
			t.Fatalf("pulls %v: the followed tag's new digest %s not pulled", p.pulls, moved)
		}
		if p.as[i] != "reg.example/app:v1" {
			t.Fatalf("the new digest was pulled judged as %q, want as the tag reg.example/app:v1", p.as[i])
		}
	})
}
