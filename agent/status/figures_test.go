package status

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The full names are ordered as their strings, whatever the bytes beside
// the slash: "a-b/x" < "a/x" < "a0/x", as strings.Compare has them.
func TestCompareFullNames(t *testing.T) {
	names := []string{"", "a", "a-b", "a.b", "a/b", "a0", "ab", "b", "kube-system", "kube", "kube-system-x", "z"}
	for _, ns1 := range names {
		for _, n1 := range names {
			for _, ns2 := range names {
				for _, n2 := range names {
					want := strings.Compare(ns1+"/"+n1, ns2+"/"+n2)
					if got := compareFullNames(ns1, n1, ns2, n2); got != want {
						t.Fatalf("compareFullNames(%q, %q, %q, %q) = %d, want %d", ns1, n1, ns2, n2, got, want)
					}
				}
			}
		}
	}
}

// Figures visits the pods in the order Pods lists them, older generations
// first, and reads of each what its copy shows.
func TestManagerFigures(t *testing.T) {
	m := NewManager(testNode, slog.New(slog.DiscardHandler))
	deleted := metav1.Now()
	old := mpod("web", "u9", instRunning("a", "c0"))
	old.DeletionTimestamp = &deleted
	web := mpod("web", "u1", instRunning("a", "c1"), instExited("b", "c2"))
	web.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	m.Update("default/web-"+testNode, func(*v1.Pod, map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
		return web, map[string]*v1.Pod{"u9": old}
	})
	set(m, "default/web-long-name-"+testNode, mpod("web-long-name", "u2"))
	other := mpod("a", "u3")
	other.Namespace = "default-x"
	set(m, "default-x/a-"+testNode, other)
	set(m, "default/a-"+testNode, mpod("a", "u4", instRunning("x", "c4")))

	var got []string
	m.Figures(func(f *Figures) {
		got = append(got, f.Namespace+"/"+f.Name+"/"+f.UID)
	})
	var want []string
	for _, p := range m.Pods() {
		want = append(want, p.Namespace+"/"+p.Name+"/"+string(p.UID))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Figures visits %v, Pods lists %v", got, want)
	}
	// "default-x/" before "default/": by the string of the full name.
	if len(want) != 5 || want[0] != "default-x/a-node1/u3" || want[3] != "default/web-node1/u9" || want[4] != "default/web-node1/u1" {
		t.Errorf("Pods = %v, want 5 by full name, with the older generation of web before web", want)
	}
	m.Figures(func(f *Figures) {
		if f.UID != "u1" {
			return
		}
		if !f.Ready || len(f.Statuses) != 2 || f.Statuses[0].State != StateRunning || f.Statuses[1].State != StateExited {
			t.Errorf("figures of web = %+v", f)
		}
	})
}

// Read takes every figure the metrics use, and keeps no slice of the pod:
// a reader changing its figures changes nothing of the pod.
func TestFiguresRead(t *testing.T) {
	started := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	lim := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("u")},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Limits: lim("1", "")}}},
			Containers: []v1.Container{
				{Name: "a", Resources: v1.ResourceRequirements{Limits: lim("1500m", "1Gi"), Requests: lim("250m", "")}},
				{Name: "b", Resources: v1.ResourceRequirements{Limits: lim("1m", "")}},
			},
		},
		Status: v1.PodStatus{
			Conditions:            []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}, {Type: v1.PodReady, Status: v1.ConditionTrue}},
			InitContainerStatuses: []v1.ContainerStatus{{Name: "i", ContainerID: "x://1", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}}},
			ContainerStatuses: []v1.ContainerStatus{
				{Name: "a", Image: "img:1", RestartCount: 3, ContainerID: "x://2", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}},
				{Name: "b", ContainerID: "x://3", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}},
				{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}},
			},
		},
	}
	var f Figures
	f.Read(p)
	want := Figures{Namespace: "ns", Name: "p", UID: "u", Ready: true, CPUQuota: true,
		InitStatuses: []ContainerFigures{{Name: "i", State: StateExited}},
		Statuses: []ContainerFigures{{Name: "a", Image: "img:1", RestartCount: 3, State: StateRunning, StartedAt: started},
			{Name: "b", State: StateCreated}, {Name: "c", State: StateNone}},
		Specs: []SpecFigures{{Name: "a", MemoryLimit: 1 << 30, CPURequestMilli: 250, CPULimitMilli: 1500}, {Name: "b", CPULimitMilli: 1}},
	}
	if !equalFigures(f, want) {
		t.Errorf("Read = %+v\nwant %+v", f, want)
	}
	f.Statuses[0].Name, f.Specs[0].Name = "changed", "changed"
	if p.Status.ContainerStatuses[0].Name != "a" || p.Spec.Containers[0].Name != "a" {
		t.Error("changing the figures changed the pod")
	}
	// Reused for a pod without a limit on one container: no quota, and
	// nothing of the pod before.
	p.Spec.Containers[1].Resources.Limits = nil
	p.Status.ContainerStatuses = p.Status.ContainerStatuses[:1]
	p.Status.Conditions = nil
	f.Read(p)
	if f.CPUQuota || f.Ready || len(f.Statuses) != 1 || f.Statuses[0].Name != "a" || f.Specs[1].CPULimitMilli != 0 {
		t.Errorf("read again = %+v", f)
	}
}

func equalFigures(a, b Figures) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.UID == b.UID && a.Ready == b.Ready && a.CPUQuota == b.CPUQuota &&
		slices.Equal(a.InitStatuses, b.InitStatuses) && slices.Equal(a.Statuses, b.Statuses) && slices.Equal(a.Specs, b.Specs)
}

// Figures reads the pods without a copy: it allocates no more objects for
// 100 pods than for 1 (the list of the pods' pointers, and the figures'
// slices, grown to the most containers of a pod, whatever the number of
// pods), where Pods allocates a copy of each.
func TestFiguresCopyNoPod(t *testing.T) {
	allocs := func(n int) (figures, pods float64) {
		m := NewManager(testNode, slog.New(slog.DiscardHandler))
		for i := range n {
			p := mpod(fmt.Sprintf("p%03d", i), fmt.Sprintf("u%03d", i), instRunning("a", fmt.Sprintf("a%d", i)), instExited("b", fmt.Sprintf("b%d", i)))
			p.Spec.Containers = []v1.Container{{Name: "a"}, {Name: "b"}}
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
			set(m, p.Namespace+"/"+p.Name, p)
		}
		seen := 0
		figures = testing.AllocsPerRun(10, func() { m.Figures(func(*Figures) { seen++ }) })
		if seen != 11*n { // AllocsPerRun runs it once more, first
			t.Fatalf("Figures visited %d pods in 11 runs, want %d", seen, 11*n)
		}
		return figures, testing.AllocsPerRun(10, func() { m.Pods() })
	}
	f1, p1 := allocs(1)
	f100, p100 := allocs(100)
	if f100 > f1 {
		t.Errorf("Figures allocates %.0f objects for 100 pods, %.0f for 1: it copies what it reads", f100, f1)
	}
	// What a copy of a pod costs, to show that the above would tell it.
	if (p100-p1)/99 < 1 {
		t.Errorf("Pods allocates %.0f objects for 100 pods, %.0f for 1: no copy to tell", p100, p1)
	}
}
