package mirror

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// The mirror reads the status manager's own pods (status.Shared) and never
// writes into one, whatever it does with them: make mirror pods of them
// (with node-local volumes, env and pull secrets to strip, or only the
// hash annotation), patch their status, keep an older generation's status on
// its mirror pod while it stops, replace the mirror pod, make it again when
// someone deletes it or changes its status, count the pods for the Node.
// A reader copies every shared pod the whole time, so that the race
// detector (go test -race) reports any write; and each pod is compared at
// the end with a copy made before it was shared. What the mirror keeps of
// the pods it patched is the one mirror pod left's at the end.
func TestMirrorNeverWritesTheSharedPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		mirrorUIDs(client)
		pods := newManagerPods()

		var mu sync.Mutex
		var shared, pristine []*v1.Pod
		share := func(p *v1.Pod) *v1.Pod {
			mu.Lock()
			shared, pristine = append(shared, p), append(pristine, p.DeepCopy())
			mu.Unlock()
			return p
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				mu.Lock()
				ps := append([]*v1.Pod(nil), shared...)
				mu.Unlock()
				for _, p := range ps {
					_ = p.DeepCopy()
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		stopReading := sync.OnceFunc(func() { close(stop); <-done })
		defer stopReading()

		p := restingPod(1)
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}})
		p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "tok"}, Key: "k"}}}}
		p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "pull"}}
		bare := restingPod(2)
		bare.Annotations = map[string]string{manifest.AnnotationHash: "bare"} // only its hash
		pods.publish(share(p))
		pods.publish(share(bare))
		m := startManaged(t, client, pods)
		eventually(t, "the mirror pods with their status", func() bool {
			a, b := getStatic(client, p.Name), getStatic(client, bare.Name)
			return a != nil && b != nil && a.Status.Phase == v1.PodRunning && b.Status.Phase == v1.PodRunning
		})
		for range 3 {
			pods.publish(p)
			m.activeStaticPods()
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		// Someone else changes the mirror pod's status, then deletes it.
		edited := notReady(getStatic(client, p.Name))
		edited.ResourceVersion = "1000"
		if _, err := client.CoreV1().Pods("kube-system").UpdateStatus(context.Background(), edited, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the status patched back", func() bool { return podReady(getStatic(client, p.Name)) })
		if err := client.CoreV1().Pods("kube-system").Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the mirror pod made again", func() bool { return getStatic(client, p.Name) != nil })

		// A new generation while the old one stops: the old one's status
		// stays on its mirror pod, then the mirror pod is replaced.
		next := withMessage(p, "")
		next.UID, next.Annotations = "static-next", map[string]string{manifest.AnnotationHash: "next"}
		share(next)
		key := p.Namespace + "/" + p.Name
		old := withMessage(p, "stopping")
		old.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC)}
		share(old)
		pods.m.Update(key, func(*v1.Pod, map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
			return next, map[string]*v1.Pod{string(old.UID): old}
		})
		eventually(t, "the stopping generation's status on its mirror pod", func() bool {
			mp := getStatic(client, p.Name)
			return mp != nil && mp.Status.Message == "stopping"
		})
		pods.m.Update(key, func(*v1.Pod, map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
			return next, map[string]*v1.Pod{}
		})
		eventually(t, "the new generation's mirror pod", func() bool {
			mp := getStatic(client, p.Name)
			return mp != nil && mp.Annotations[AnnotationMirror] == "next" && mp.Status.Phase == v1.PodRunning
		})
		m.activeStaticPods()
		pods.m.Remove(bare.Namespace + "/" + bare.Name)
		eventually(t, "the orphaned mirror pod deleted", func() bool { return getStatic(client, bare.Name) == nil })
		// What was patched is kept for the one mirror pod left, and only
		// for it: not for the ones deleted, replaced or orphaned.
		m.podsMu.Lock()
		s := m.sync
		m.podsMu.Unlock()
		left := getStatic(client, p.Name)
		eventually(t, "one mirror pod remembered patched", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			_, ok := s.patched[string(left.UID)]
			return ok && len(s.patched) == 1
		})

		stopReading()
		mu.Lock()
		defer mu.Unlock()
		for i, p := range shared {
			if !equality.Semantic.DeepEqual(p, pristine[i]) {
				t.Errorf("shared pod %s (uid %s) was changed", p.Name, p.UID)
			}
		}
	})
}
