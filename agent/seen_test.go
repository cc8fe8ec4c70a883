package agent

import (
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// A pod that was never started leaves no file; a started one's config.seen
// survives a daemon restart (a new store on the same root) and goes with the
// pod's directory.
func TestSeenRecordedOnlyForStartedPods(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	before := time.Now()
	if got := NewSeenStore(paths).Seen("u1"); got.Before(before) {
		t.Errorf("seen of an unknown pod = %v, want the current time", got)
	}
	if _, err := os.Stat(paths.PodDir("u1")); !os.IsNotExist(err) {
		t.Fatalf("Seen made the pod's directory (err %v): a pod never started would leave it", err)
	}

	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1",
		Annotations: map[string]string{manifest.AnnotationSeen: at.Format(time.RFC3339Nano)}}}
	started := at.Add(time.Second)
	if got := NewSeenStore(paths).Started("u1", started.Add(time.Hour)); !got.Equal(started.Add(time.Hour)) {
		t.Errorf("start time of a pod never started = %v, want the one given", got)
	}
	if err := NewSeenStore(paths).Record(pod, started); err != nil {
		t.Fatal(err)
	}
	if got := NewSeenStore(paths).Seen("u1"); !got.Equal(at) {
		t.Errorf("seen after a restart = %v, want %v", got, at)
	}
	if got := NewSeenStore(paths).Started("u1", time.Now()); !got.Equal(started) {
		t.Errorf("start time after a restart = %v, want %v", got, started)
	}
	// A second record keeps the first time.
	pod.Annotations[manifest.AnnotationSeen] = at.Add(time.Hour).Format(time.RFC3339Nano)
	if err := NewSeenStore(paths).Record(pod, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := NewSeenStore(paths).Seen("u1"); !got.Equal(at) {
		t.Errorf("seen after a second record = %v, want %v", got, at)
	}
	if err := manifest.RemoveVolumes("u1", paths); err != nil {
		t.Fatal(err)
	}
	if got := NewSeenStore(paths).Seen("u1"); !got.After(at) {
		t.Errorf("a pod seen anew after its removal kept its old time %v", got)
	}
}
