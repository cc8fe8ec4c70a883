package status

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func mpod(name, uid string, cs ...v1.ContainerStatus) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-" + testNode, UID: types.UID(uid)},
		Status:     v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: cs},
	}
}

func instRunning(name, id string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, ContainerID: ContainerIDPrefix + id, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func instExited(name, id string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, ContainerID: ContainerIDPrefix + id, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}
}

// set makes p the desired pod of key, with no older generation.
func set(m *Manager, key string, p *v1.Pod) {
	m.Update(key, func(*v1.Pod, map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) { return p, nil })
}

// A container instance that terminated never runs again: such an update
// keeps the cached status and is logged; a new instance of the container
// may run.
func TestManagerRefusesIllegalTransition(t *testing.T) {
	var log bytes.Buffer
	m := NewManager(testNode, slog.New(slog.NewTextHandler(&log, nil)))
	const key = "default/web-" + testNode
	set(m, key, mpod("web", "u1", instRunning("a", "c1")))
	set(m, key, mpod("web", "u1", instExited("a", "c1")))
	set(m, key, mpod("web", "u1", instRunning("a", "c1")))
	if got := m.Desired(key).Status.ContainerStatuses[0].State; got.Terminated == nil {
		t.Errorf("a terminated container turned running: %+v", got)
	}
	if !strings.Contains(log.String(), "Status update on pod aborted") || !strings.Contains(log.String(), "c1") {
		t.Errorf("the refusal was not logged: %q", log.String())
	}
	// Restarted: a new instance runs; the pod of another UID is another pod.
	set(m, key, mpod("web", "u1", instRunning("a", "c2")))
	if got := m.Desired(key).Status.ContainerStatuses[0]; got.State.Running == nil || got.ContainerID != ContainerIDPrefix+"c2" {
		t.Errorf("a restarted container = %+v, want c2 running", got)
	}
	set(m, key, mpod("web", "u2", instRunning("a", "c1")))
	if got := m.Desired(key); got.UID != "u2" {
		t.Errorf("desired = %s, want the new generation u2", got.UID)
	}
}

// A subscriber hears each changed key once per Next, the keys it knew at
// the start, and a removed key as no pod; an orphan key it does not keep
// is never listed.
func TestManagerWatch(t *testing.T) {
	m := NewManager(testNode, slog.New(slog.DiscardHandler))
	web, db, orphan := "default/web-"+testNode, "default/db-"+testNode, "orphan/u9"
	set(m, web, mpod("web", "u1"))
	w := m.Watch([]string{web, db}, func(key string) bool { return !strings.HasPrefix(key, "orphan/") })
	defer w.Close()
	names := func() []string {
		t.Helper()
		select {
		case <-w.C():
		default:
			t.Fatal("watch not signalled")
		}
		var out []string
		for _, key := range w.Next() {
			n := key
			if w.Desired(key).IsZero() {
				n += "=nil"
			}
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	if got, want := names(), []string{db + "=nil", web}; !slices.Equal(got, want) {
		t.Errorf("first Next = %q, want %q", got, want)
	}
	set(m, db, mpod("db", "u2"))
	set(m, db, mpod("db", "u2"))
	set(m, orphan, mpod("x", "u9"))
	if got, want := names(), []string{db}; !slices.Equal(got, want) {
		t.Errorf("Next = %q, want %q", got, want)
	}
	m.Remove(web)
	if got, want := names(), []string{web + "=nil"}; !slices.Equal(got, want) {
		t.Errorf("Next after a removal = %q, want %q", got, want)
	}
	if len(m.removed) != 0 {
		t.Errorf("removed keys kept after every subscriber saw them: %v", m.removed)
	}
}

// The STATUS line kept by increments follows updates and removals.
func TestManagerLine(t *testing.T) {
	m := NewManager(testNode, slog.New(slog.DiscardHandler))
	crash := v1.ContainerStatus{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: CrashLoopBackOff}}}
	set(m, "default/web-"+testNode, mpod("web", "u1", instRunning("a", "c1")))
	set(m, "default/etcd-"+testNode, mpod("etcd", "u2", crash))
	m.Update("orphan/u3", func(*v1.Pod, map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
		return nil, map[string]*v1.Pod{"u3": mpod("old", "u3", instRunning("a", "c3"))}
	})
	if got, want := m.Line(1), "3 pods: 2 running, 1 waiting (etcd: CrashLoopBackOff); 1 manifest problem"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	m.Remove("default/etcd-" + testNode)
	m.Remove("orphan/u3")
	if got, want := m.Line(0), "1 pod: 1 running"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	if got := len(m.Pods()); got != 1 {
		t.Errorf("Pods lists %d pods, want 1", got)
	}
}

// Publishing the same pods again (a resync that changed nothing) is a
// change to the subscribers, as any, and counts them once.
func TestManagerSamePodsAgain(t *testing.T) {
	m := NewManager(testNode, slog.New(slog.DiscardHandler))
	web := "default/web-" + testNode
	crash := v1.ContainerStatus{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: CrashLoopBackOff}}}
	desired, old := mpod("web", "u2", crash), mpod("web", "u1", instRunning("a", "c1"))
	again := func(*v1.Pod, map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
		return desired, map[string]*v1.Pod{"u1": old}
	}
	m.Update(web, again)
	w := m.Watch(nil, func(string) bool { return true })
	defer w.Close()
	<-w.C()
	w.Next()
	for i := range 3 {
		changed := m.Changed()
		m.Update(web, func(d *v1.Pod, s map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
			if d != desired || len(s) != 1 || s["u1"] != old {
				t.Fatalf("Update %d was given %p %v, want the pods of the last", i, d, s)
			}
			return again(d, s)
		})
		select {
		case <-changed:
		default:
			t.Fatalf("Update %d: Changed not closed", i)
		}
		select {
		case <-w.C():
		default:
			t.Fatalf("Update %d: watch not signalled", i)
		}
		if got := w.Next(); !slices.Equal(got, []string{web}) {
			t.Errorf("Update %d: Next = %q, want %q", i, got, web)
		}
		if got, want := m.Line(0), "2 pods: 1 running, 1 waiting (web: CrashLoopBackOff)"; got != want {
			t.Errorf("Update %d: Line = %q, want %q", i, got, want)
		}
		if m.Desired(web) != desired || m.Stopping(web, "u1") != old {
			t.Errorf("Update %d: pods not kept", i)
		}
	}
	// The same desired pod without the older generation is a new entry.
	set(m, web, desired)
	if got, want := m.Line(0), "1 pod: 1 waiting (web: CrashLoopBackOff)"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
}

// Changed is closed at the next change, for every caller since the last,
// whether or not anyone asked before the changes that went before.
func TestManagerChanged(t *testing.T) {
	m := NewManager(testNode, slog.New(slog.DiscardHandler))
	web := "default/web-" + testNode
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	set(m, web, mpod("web", "u1")) // nobody asked
	set(m, web, mpod("web", "u1"))
	c1, c2 := m.Changed(), m.Changed()
	if closed(c1) || closed(c2) {
		t.Fatal("Changed closed before a change")
	}
	set(m, web, mpod("web", "u2"))
	if !closed(c1) || !closed(c2) {
		t.Fatal("Changed not closed at a change")
	}
	c3 := m.Changed()
	if closed(c3) {
		t.Fatal("Changed asked after a change is closed")
	}
	m.Touch()
	if !closed(c3) {
		t.Fatal("Changed not closed at Touch")
	}
	c4 := m.Changed()
	m.Remove(web)
	if !closed(c4) {
		t.Fatal("Changed not closed at a removal")
	}
}

// A watch shares the pods the Manager holds: the pod published again is
// Same as the one read before, a changed one is not, and nothing the
// Manager does changes a pod it was given, not even one whose illegal
// transition it refuses.
func TestWatchSharesUnchangedPods(t *testing.T) {
	m := NewManager(testNode, slog.New(slog.DiscardHandler))
	web := "default/web-" + testNode
	w := m.Watch(nil, func(string) bool { return true })
	defer w.Close()
	p := mpod("web", "u1", instExited("a", "c1"))
	pristine := p.DeepCopy()
	set(m, web, p)
	first := w.Desired(web)
	if first.IsZero() || first.UID() != "u1" || first.Phase() != v1.PodRunning {
		t.Fatalf("Desired = %v, want u1 running", first.Copy())
	}
	m.Update(web, func(d *v1.Pod, s map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) { return d, s })
	if !w.Desired(web).Same(first) {
		t.Error("the same pod published again is not Same")
	}
	refused := mpod("web", "u1", instRunning("a", "c1"))
	set(m, web, refused)
	if !w.Desired(web).Same(first) {
		t.Error("a refused transition did not keep the pod shown")
	}
	q := mpod("web", "u1", instExited("a", "c1"), instRunning("b", "c2"))
	set(m, web, q)
	if w.Desired(web).Same(first) || !w.Desired(web).Same(Share(q)) {
		t.Error("a changed pod is Same as the one before, or not the one given")
	}
	r := mpod("web", "u2")
	m.Update(web, func(d *v1.Pod, s map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
		s[string(d.UID)] = d
		return r, s
	})
	if st := w.Stopping(web); len(st) != 1 || !st[0].Same(Share(q)) {
		t.Errorf("Stopping = %v, want the older generation as given", st)
	}
	if !equality.Semantic.DeepEqual(p, pristine) || first.Copy() == nil || !equality.Semantic.DeepEqual(first.Copy(), pristine) {
		t.Error("the Manager changed a pod it was given")
	}
	m.Remove(web)
	if !w.Desired(web).IsZero() || w.Desired(web).Same(first) {
		t.Error("a removed key shows a pod")
	}
}
