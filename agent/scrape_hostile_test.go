package agent

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// hostilePods are pods a scrape must show as it always did, beside
// oddPods': a sidecar (a restartable init container) running, a pod with
// no status at all, a pod with no container, the longest names the API
// allows and an image full of what a label must escape, two older
// generations stopping beside the desired pod with containers of one name
// (the last by UID wins), an adopted pod shown under an orphan key with
// the name of a desired pod, a container whose state has nothing set but
// its ID, a container whose state says both running and terminated, a
// doubled Ready condition, and stats of a pod the agent does not know.
// Each is shown under key, in that order.
func hostilePods() ([]string, []*v1.Pod, *podspec.Summary) {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(scrapeAt.Add(-d)) }
	running := func(d time.Duration) v1.ContainerState {
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at(d)}}
	}
	res := func(cpuReq, cpuLim, mem string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{Limits: v1.ResourceList{}, Requests: v1.ResourceList{}}
		if cpuReq != "" {
			r.Requests[v1.ResourceCPU] = resource.MustParse(cpuReq)
		}
		if cpuLim != "" {
			r.Limits[v1.ResourceCPU] = resource.MustParse(cpuLim)
		}
		if mem != "" {
			r.Limits[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return r
	}
	always := v1.ContainerRestartPolicyAlways
	deleted := at(time.Minute)
	longNS := strings.Repeat("n", 63)
	longName := strings.Repeat("p", 253-len("-"+testNode)) + "-" + testNode
	longCtr := strings.Repeat("c", 63)
	nasty := "reg.example/x\"y\\z\n{a=\"b\"}:\u00e9\u2028"
	var keys []string
	var pods []*v1.Pod
	add := func(key string, p *v1.Pod) { keys, pods = append(keys, key), append(pods, p) }

	// A sidecar running beside a regular container, both with quotas.
	add("default/side-"+testNode, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "side-" + testNode, Namespace: "default", UID: "sd1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "proxy", Image: "envoy", RestartPolicy: &always, Resources: res("", "200m", "64Mi")}},
			Containers:     []v1.Container{{Name: "app", Image: "app", Resources: res("100m", "300m", "1Gi")}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning,
			Conditions:            []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}, {Type: v1.PodReady, Status: v1.ConditionTrue}},
			InitContainerStatuses: []v1.ContainerStatus{{Name: "proxy", Image: "envoy:1", ContainerID: "staticpodd://sp", RestartCount: 3, State: running(5 * time.Minute)}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Image: "app:1", ContainerID: "staticpodd://sa",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at(time.Minute)}, Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}},
		},
	})
	// No status at all.
	add("default/bare-"+testNode, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bare-" + testNode, Namespace: "default", UID: "b1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox", Resources: res("", "1", "")}}},
	})
	// No container at all.
	add("default/empty-"+testNode, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "empty-" + testNode, Namespace: "default", UID: "x1"}})
	// The longest names, an image a label must escape, a state with
	// nothing set but an ID.
	add(longNS+"/"+longName, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: longName, Namespace: longNS, UID: types.UID(strings.Repeat("u", 36))},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: longCtr, Image: nasty, Resources: res("", "", "1")}, {Name: "idle", Image: nasty}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
			ContainerStatuses: []v1.ContainerStatus{
				{Name: longCtr, Image: nasty, ContainerID: "staticpodd://lc", RestartCount: 2147483647, State: running(time.Hour)},
				{Name: "idle", Image: nasty, ContainerID: "staticpodd://li"},
			}},
	})
	// Two older generations stopping beside the desired pod, each with a
	// container "db" of its own image; the desired one not yet started.
	g := func(uid, image string, del bool, st v1.ContainerState) *v1.Pod {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "db-" + testNode, Namespace: "kube-system", UID: types.UID(uid)},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "db", Image: image, Resources: res(uid[1:]+"00m", "", uid[1:]+"Mi")}}},
			Status:     v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "db", Image: image, ContainerID: "staticpodd://" + uid, State: st}}},
		}
		if del {
			p.DeletionTimestamp = &deleted
		}
		return p
	}
	add("kube-system/db-"+testNode, g("g5", "db:5", true, running(3*time.Hour)))
	add("kube-system/db-"+testNode, g("g2", "db:2", true, running(2*time.Hour)))
	add("kube-system/db-"+testNode, g("g9", "db:9", false, v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}))
	// An adopted pod nobody wants, of the name of a desired pod, and that
	// desired pod, not started.
	add(orphanPrefix+"o1", &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-" + testNode, Namespace: "default", UID: "o1", DeletionTimestamp: &deleted},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "redis", Image: "redis:6"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning,
			ContainerStatuses: []v1.ContainerStatus{{Name: "redis", Image: "redis:6", ContainerID: "staticpodd://o1", State: running(4 * time.Hour)}}},
	})
	add("default/cache-"+testNode, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-" + testNode, Namespace: "default", UID: "c7"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "redis", Image: "redis:7", Resources: res("", "2", "2Gi")}}},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	})

	u := func(n uint64) podspec.Usage {
		return podspec.Usage{CPUUsageNanos: n * 1e8, MemoryUsage: n << 20, MemoryWorkingSet: n << 19, MemoryRSS: n << 18, MemoryCache: n << 17, Pids: n,
			CPUPeriods: n * 10, CPUThrottledPeriods: n, CPUThrottledNanos: n * 1e6}
	}
	ctr := func(id, name string, n uint64) podspec.ContainerStats {
		return podspec.ContainerStats{ID: id, Name: name, Usage: u(n), RootfsBytes: n << 12}
	}
	sum := &podspec.Summary{
		Node: podspec.NodeStats{Time: scrapeAt, MemoryCapacity: 8 << 30, MemoryWorkingSet: 1 << 30, MemoryUsage: 2 << 30, CPUUsageNanos: 5e9},
		Pods: []podspec.PodStats{
			{UID: "sd1", Namespace: "default", Name: "side-" + testNode, Usage: u(2), Containers: []podspec.ContainerStats{ctr("sp", "proxy", 1), ctr("sa", "app", 2)}},
			{UID: strings.Repeat("u", 36), Namespace: longNS, Name: longName, Usage: u(3), Containers: []podspec.ContainerStats{ctr("lc", longCtr, 3), ctr("li", "idle", 1)}},
			{UID: "g5", Namespace: "kube-system", Name: "db-" + testNode, Usage: u(5), Containers: []podspec.ContainerStats{ctr("g5", "db", 5)}},
			{UID: "g2", Namespace: "kube-system", Name: "db-" + testNode, Usage: u(4), Containers: []podspec.ContainerStats{ctr("g2", "db", 4)}},
			{UID: "o1", Namespace: "default", Name: "cache-" + testNode, Usage: u(6), Containers: []podspec.ContainerStats{ctr("o1", "redis", 6)}},
			{UID: "zz", Namespace: "other", Name: "unknown-" + testNode, Usage: u(1), Containers: []podspec.ContainerStats{ctr("zz", "who", 1)}},
		},
	}
	return keys, pods, sum
}

// TestScrapeOutputHostile: every metrics endpoint that reads the pods shows
// hostile pods as the golden file says, byte for byte (go test -run
// TestScrapeOutputHostile -update ./agent/ writes it).
func TestScrapeOutputHostile(t *testing.T) {
	keys, pods, sum := hostilePods()
	a := New(Config{NodeName: testNode}, statsRuntime{sum: sum}, slog.New(slog.DiscardHandler))
	for i, key := range keys {
		p := pods[i]
		a.statuses.Update(key, func(desired *v1.Pod, stopping map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
			if p.DeletionTimestamp != nil {
				stopping[string(p.UID)] = p
			} else {
				desired = p
			}
			return desired, stopping
		})
	}
	if _, err := a.debugs.add("sd1", v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "app", Image: "busybox"}}); err != nil {
		t.Fatal(err)
	}
	if got := a.Pods(); len(got) != len(pods) {
		t.Fatalf("the agent shows %d pods, want %d", len(got), len(pods))
	}
	checkScrapeGolden(t, a, "scrape_hostile.golden")
}
