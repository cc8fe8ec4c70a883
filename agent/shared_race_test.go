package agent

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/status"
)

// The published pod shares the desired pod's spec and metadata, and the
// worker generates the next status from the published one. A subscriber
// (the mirror) reads the published pods as they are, beside the workers:
// while pods are edited, their containers exit and restart, resyncs
// republish them and a pod is removed, it copies each pod shown (as the
// mirror builds a mirror pod) and reads its status (as it patches it), and
// Pods is read too. Nothing may change a pod once it was shown: each one
// read is, at the end, what it was when read (a change in place is also a
// data race under go test -race), and each desired pod handed to the agent
// is what it was when handed.
func TestSharedPodsNeverChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{SyncFrequency: time.Second})

		type seen struct {
			shared status.Shared
			copy   *v1.Pod
		}
		var shown []seen
		kick, read := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(read)
			w := h.a.Watch()
			defer w.Close()
			for range kick {
				for range 3 {
					for _, key := range w.Next() {
						ss := append(w.Stopping(key), w.Desired(key))
						for _, s := range ss {
							if s.IsZero() {
								continue
							}
							if i := len(shown) - 1; i < 0 || !shown[i].shared.Same(s) {
								shown = append(shown, seen{shared: s, copy: s.Copy()})
							}
							mp := s.Copy() // the mirror pod, made of a copy
							mp.Annotations = map[string]string{"m": s.Annotation(manifest.AnnotationHash)}
							if _, err := json.Marshal(mp); err != nil {
								t.Error(err)
							}
							if _, err := s.StatusJSON(); err != nil {
								t.Error(err)
							}
						}
					}
					h.a.Pods()
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()

		var handed []seen
		web := func(uid, image string) manifest.Pod {
			p := testPod("web", uid, v1.RestartPolicyAlways, ctr("main", image), ctr("log", "busybox"))
			p.Labels = map[string]string{"app": "web"}
			p.Annotations = map[string]string{manifest.AnnotationContainerHashes: "main=1", "team": "web"}
			p.Spec.InitContainers = []v1.Container{ctr("init", "busybox")}
			p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}
			handed = append(handed, seen{copy: p.Pod.DeepCopy()})
			handed[len(handed)-1].shared = status.Share(p.Pod)
			return p
		}
		exit := func(name string, code int) {
			p := h.pod("web")
			for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				if cs.Name == name && cs.State.Running != nil {
					rt.Exit(strings.TrimPrefix(cs.ContainerID, containerIDPrefix), code)
				}
			}
		}
		step := func(f func()) {
			kick <- struct{}{}
			f()
			synctest.Wait()
		}
		db := testPod("db", "d1", v1.RestartPolicyAlways, ctr("db", "etcd"))
		step(func() { h.send([]manifest.Pod{web("u1", "nginx:1"), db}) })
		step(func() { exit("init", 0); time.Sleep(time.Second) })
		step(func() { time.Sleep(3 * time.Second) })
		step(func() { exit("main", 1); time.Sleep(30 * time.Second) })
		step(func() { exit("log", 137); time.Sleep(30 * time.Second) })
		step(func() { h.send([]manifest.Pod{web("u2", "nginx:2"), db}); time.Sleep(time.Second) })
		step(func() { time.Sleep(30 * time.Second) })
		step(func() { exit("init", 0); time.Sleep(3 * time.Second) })
		step(func() { exit("main", 2); time.Sleep(30 * time.Second) })
		step(func() { h.send([]manifest.Pod{db}); time.Sleep(30 * time.Second) })
		close(kick)
		<-read

		if len(shown) < 5 {
			t.Fatalf("%d pods shown, want the pods of each step", len(shown))
		}
		for _, s := range shown {
			if now := s.shared.Copy(); !reflect.DeepEqual(now, s.copy) {
				t.Errorf("pod %s shown as\n%+v\nbecame\n%+v", s.copy.UID, s.copy, now)
			}
		}
		for _, s := range handed {
			if now := s.shared.Copy(); !reflect.DeepEqual(now, s.copy) {
				t.Errorf("desired pod %s handed as\n%+v\nbecame\n%+v", s.copy.UID, s.copy, now)
			}
		}
	})
}
