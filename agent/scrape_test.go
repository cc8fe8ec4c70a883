package agent

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/agent/status"
)

// statsRuntime is a runtime that only measures: sum, always.
type statsRuntime struct {
	Runtime
	sum *podspec.Summary
}

func (r statsRuntime) Stats(context.Context) (*podspec.Summary, error) { return r.sum, nil }

// scrapeAt is the time of every figure of the scrape tests, fixed so that
// their output is.
var scrapeAt = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// restingAgent is an agent whose status manager shows pods, at rest, and
// whose runtime measures sum: what a scrape reads, without a pod worker.
// Each pod is shown under its full name; one with a deletion timestamp is
// an older generation the pod of its name still stops.
func restingAgent(pods []v1.Pod, sum *podspec.Summary) *Agent {
	a := New(Config{NodeName: testNode}, statsRuntime{sum: sum}, slog.New(slog.DiscardHandler))
	byKey := map[string][]*v1.Pod{}
	var keys []string
	for i := range pods {
		k := pods[i].Namespace + "/" + pods[i].Name
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], &pods[i])
	}
	for _, k := range keys {
		a.statuses.Update(k, func(*v1.Pod, map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
			var desired *v1.Pod
			stopping := map[string]*v1.Pod{}
			for _, p := range byKey[k] {
				if p.DeletionTimestamp != nil {
					stopping[string(p.UID)] = p
				} else {
					desired = p
				}
			}
			return desired, stopping
		})
	}
	return a
}

// busyPods are n pods of two containers each, running and ready, with
// limits, and their stats: a node's pods at rest.
func busyPods(n int) ([]v1.Pod, *podspec.Summary) {
	sum := &podspec.Summary{Node: podspec.NodeStats{Time: scrapeAt, MemoryCapacity: 8 << 30, MemoryWorkingSet: 1 << 30, CPUUsageNanos: 5e9}}
	var pods []v1.Pod
	for i := range n {
		name, uid := fmt.Sprintf("pod-%03d-%s", i, testNode), fmt.Sprintf("uid-%03d", i)
		pod := v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID(uid),
				Annotations: map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": uid}},
			Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
				{Type: v1.PodInitialized, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue}, {Type: v1.PodScheduled, Status: v1.ConditionTrue}}},
		}
		ps := podspec.PodStats{UID: uid, Namespace: "kube-system", Name: name, Usage: podspec.Usage{CPUUsageNanos: 1e9, MemoryWorkingSet: 1 << 20, Pids: 2}}
		for _, c := range []string{"main", "sidecar"} {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c, Image: "registry.k8s.io/etcd:3.6.0-0",
				Command:        []string{"etcd", "--data-dir=/var/lib/etcd", "--listen-client-urls=https://127.0.0.1:2379"},
				Resources:      v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi"), v1.ResourceCPU: resource.MustParse("1")}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/readyz"}}}})
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{Name: c, Ready: true, Started: new(true),
				Image: "registry.k8s.io/etcd:3.6.0-0", ImageID: "registry.k8s.io/etcd@sha256:0123456789abcdef",
				ContainerID: "staticpodd://" + uid + c, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(scrapeAt.Add(-time.Hour))}}})
			ps.Containers = append(ps.Containers, podspec.ContainerStats{ID: uid + c, Name: c, Usage: ps.Usage, RootfsBytes: 4096, LogsBytes: 1024})
		}
		pods = append(pods, pod)
		sum.Pods = append(sum.Pods, ps)
	}
	return pods, sum
}

// scrapePaths are the metrics endpoints that read the pods.
var scrapePaths = []string{"/metrics", "/metrics/cadvisor", "/metrics/resource", "/metrics/probes"}

// scrape is the body of a GET of path from h.
func scrape(t testing.TB, h http.Handler, path string) string {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// discardWriter is a response writer that keeps nothing of the body: a
// scrape's cost without the client's.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

// copyingAgent reads the pods for a scrape as the scrapes did before they
// read figures: through Pods, a copy of every pod with its status.
type copyingAgent struct{ *Agent }

func (c copyingAgent) PodFigures(f func(*status.Figures)) { status.FiguresOf(c.Pods(), f) }

// scraper returns a scrape of path from an agent at rest with n busy pods,
// its body discarded; copying: the agent is a copyingAgent.
func scraper(n int, path string, copying bool) func() {
	pods, sum := busyPods(n)
	var a server.MetricsAgent = restingAgent(pods, sum)
	if copying {
		a = copyingAgent{a.(*Agent)}
	}
	h := server.ReadOnly(a, server.NewMetrics(a), slog.New(slog.DiscardHandler))
	req := httptest.NewRequest(http.MethodGet, path, nil)
	w := discardWriter{http.Header{}}
	return func() { h.ServeHTTP(w, req) }
}

// BenchmarkScrape measures one scrape of each metrics endpoint that reads
// the pods, from an agent at rest with 100 pods of two containers, its
// stats measured in memory: what a scrape costs beyond reading cgroups and
// sending the body.
//
//	go test -run '^$' -bench BenchmarkScrape -benchmem ./agent/
func BenchmarkScrape(b *testing.B) {
	for _, path := range scrapePaths {
		b.Run(path[1:], func(b *testing.B) {
			scrape := scraper(100, path, false)
			b.ReportAllocs()
			for b.Loop() {
				scrape()
			}
		})
	}
}

// perPod is what a scrape of path allocates for each pod more, in objects
// and bytes: from 1 pod to 100; copying: from a copyingAgent.
func perPod(path string, copying bool) (allocs, bytes float64) {
	measure := func(n int) (float64, float64) {
		scrape := scraper(n, path, copying)
		scrape()
		allocs := testing.AllocsPerRun(10, scrape)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 10 {
			scrape()
		}
		runtime.ReadMemStats(&m1)
		return allocs, float64(m1.TotalAlloc-m0.TotalAlloc) / 10
	}
	a1, b1 := measure(1)
	a100, b100 := measure(100)
	return (a100 - a1) / 99, (b100 - b1) / 99
}

// A scrape allocates for each pod its metrics, not a copy of the pod: of
// busy pods (two containers each, 4 conditions, probes, limits), a scrape
// of each endpoint that reads them saves at least half of what copying
// them costs, against the same scrape from an agent that copies them
// (copyingAgent), measured in the same run. Measured when written
// (2026-12-06), with a copy of every pod / without: /metrics 93 / 57
// objects, 10.8 / 2.5 KB a pod; /metrics/resource 187 / 149, 14.4 / 6.6
// KB; /metrics/cadvisor 1192 / 1155, 57.3 / 48.0 KB (its 44 series a pod
// are most of it); a copy of the pods alone (Pods) 19 objects, 5.3 KB. The race
// detector's build allocates more for the series (cadvisor 1183 objects a
// pod without a copy), so the bound is not a number of objects.
func TestScrapeAllocationPerPod(t *testing.T) {
	copyAllocs, copyBytes := perPodCopy()
	t.Logf("a copy of the pods: %.1f objects and %.2f KB a pod", copyAllocs, copyBytes/1000)
	if copyAllocs < 10 || copyBytes < 1000 {
		t.Fatalf("a copy of the pods allocates %.1f objects and %.2f KB a pod: too little to tell", copyAllocs, copyBytes/1000)
	}
	for _, path := range []string{"/metrics", "/metrics/resource", "/metrics/cadvisor"} {
		allocs, bytes := perPod(path, false)
		withCopy, withCopyBytes := perPod(path, true)
		t.Logf("%s: %.1f objects and %.2f KB a pod; from an agent that copies the pods %.1f and %.2f KB", path, allocs, bytes/1000, withCopy, withCopyBytes/1000)
		if allocs > withCopy-copyAllocs/2 || bytes > withCopyBytes-copyBytes/2 {
			t.Errorf("a scrape of %s allocates %.1f objects and %.2f KB a pod, one that copies the pods %.1f and %.2f KB: it saves less than half of a copy",
				path, allocs, bytes/1000, withCopy, withCopyBytes/1000)
		}
	}
}

// perPodCopy is what Pods allocates for each busy pod more: from 1 pod to
// 100.
func perPodCopy() (allocs, bytes float64) {
	measure := func(n int) (float64, float64) {
		pods, sum := busyPods(n)
		a := restingAgent(pods, sum)
		allocs := testing.AllocsPerRun(10, func() { a.Pods() })
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 10 {
			a.Pods()
		}
		runtime.ReadMemStats(&m1)
		return allocs, float64(m1.TotalAlloc-m0.TotalAlloc) / 10
	}
	a1, b1 := measure(1)
	a100, b100 := measure(100)
	return (a100 - a1) / 99, (b100 - b1) / 99
}

var updateGolden = flag.Bool("update", false, "write the golden files of the scrape tests")

// odd pods are what a scrape must tell apart: init containers, a
// container made but not started, one waiting for its image, an older
// generation stopping beside the new one with a container of the same name,
// a pod with no status yet, a CPU request without a limit, a pod with a
// CPU quota and a debug container, stats of a container the pod does not
// list.
func oddPods() ([]v1.Pod, *podspec.Summary) {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(scrapeAt.Add(-d)) }
	running := func(d time.Duration) v1.ContainerState {
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at(d)}}
	}
	limits := func(cpu, mem string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{Limits: v1.ResourceList{}}
		if cpu != "" {
			r.Limits[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			r.Limits[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return r
	}
	ready := func(s v1.ConditionStatus) []v1.PodCondition {
		return []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: s}}
	}
	withReq := limits("", "64Mi")
	withReq.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}
	deleted := at(time.Minute)
	pods := []v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + testNode, Namespace: "default", UID: "w1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init", Image: "busybox", Resources: limits("100m", "")}},
			Containers: []v1.Container{{Name: "web", Image: "nginx:1.2", Resources: limits("500m", "128Mi")},
				{Name: "log", Image: "busybox", Resources: limits("", "32Mi")},
				{Name: "side", Image: "busybox", Resources: limits("1500m", "")}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending, Conditions: ready(v1.ConditionFalse),
			InitContainerStatuses: []v1.ContainerStatus{{Name: "init", Image: "busybox:latest", ContainerID: "staticpodd://i1",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
			ContainerStatuses: []v1.ContainerStatus{
				{Name: "web", Image: "nginx:1.2", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
				{Name: "log", Image: "busybox:latest", ContainerID: "staticpodd://l1", RestartCount: 1,
					State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
				{Name: "side", Image: "busybox:latest", ContainerID: "staticpodd://s1", RestartCount: 4, State: running(10 * time.Minute)},
			}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + testNode, Namespace: "default", UID: "w0", DeletionTimestamp: &deleted},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: "nginx:1.1", Resources: limits("2", "1Gi")}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: ready(v1.ConditionTrue),
			ContainerStatuses: []v1.ContainerStatus{{Name: "web", Image: "nginx:1.1", ContainerID: "staticpodd://o1", RestartCount: 7, State: running(2 * time.Hour)}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-" + testNode, Namespace: "kube-system", UID: "e1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.0-0", Resources: withReq}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: ready(v1.ConditionTrue),
			ContainerStatuses: []v1.ContainerStatus{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.0-0", ContainerID: "staticpodd://e1",
				State: running(time.Hour + 500*time.Millisecond)}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "quota-" + testNode, Namespace: "kube-system", UID: "q1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "prep", Image: "busybox", Resources: limits("10m", "")}},
			Containers:     []v1.Container{{Name: "main", Image: "busybox", Resources: limits("1m", "1")}},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: ready(v1.ConditionTrue),
			InitContainerStatuses: []v1.ContainerStatus{{Name: "prep", Image: "busybox:latest", ContainerID: "staticpodd://p1", RestartCount: 2,
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "main", Image: "busybox:latest", ContainerID: "staticpodd://m1", State: running(3 * time.Second)}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "new-" + testNode, Namespace: "default", UID: "n1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}, {Name: "odd", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{
			{Name: "odd", Image: "busybox:latest"}}},
	}}
	u := func(n uint64) podspec.Usage {
		return podspec.Usage{CPUUsageNanos: n * 1e8, MemoryUsage: n << 20, MemoryWorkingSet: n << 19, MemoryRSS: n << 18, MemoryCache: n << 17, Pids: n,
			CPUPeriods: n * 10, CPUThrottledPeriods: n, CPUThrottledNanos: n * 1e6}
	}
	sum := &podspec.Summary{
		Node: podspec.NodeStats{Time: scrapeAt, MemoryCapacity: 8 << 30, MemoryWorkingSet: 1 << 30, MemoryUsage: 2 << 30, CPUUsageNanos: 5e9},
		Pods: []podspec.PodStats{
			{UID: "w1", Namespace: "default", Name: "web-" + testNode, Usage: u(3),
				Network:    []podspec.InterfaceStats{{Name: "eth0", RxBytes: 100, RxPackets: 2, RxDropped: 1, RxErrors: 1, TxBytes: 50, TxPackets: 1}},
				Containers: []podspec.ContainerStats{{ID: "l1", Name: "log", Usage: u(1)}, {ID: "s1", Name: "side", Usage: u(2), RootfsBytes: 8192}}},
			{UID: "w0", Namespace: "default", Name: "web-" + testNode, Usage: u(4),
				Containers: []podspec.ContainerStats{{ID: "o1", Name: "web", Usage: u(4), RootfsBytes: 4096}}},
			{UID: "e1", Namespace: "kube-system", Name: "etcd-" + testNode, Usage: u(5),
				Containers: []podspec.ContainerStats{{ID: "e1", Name: "etcd", Usage: u(5)}, {ID: "g1", Name: "ghost", Usage: u(1)}}},
			{UID: "q1", Namespace: "kube-system", Name: "quota-" + testNode, Usage: u(6),
				Containers: []podspec.ContainerStats{{ID: "m1", Name: "main", Usage: u(6)}}},
		},
	}
	return pods, sum
}

// agentFamilies keeps of /metrics the lines of the figures read from the
// agent: not the Go runtime's, the process's or the requests'.
func agentFamilies(text string) string {
	var out []string
	for _, l := range strings.SplitAfter(text, "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(l, "# HELP "), "# TYPE ")
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "kubelet_http_") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "")
}

// TestScrapeOutput: every metrics endpoint that reads the pods shows odd
// pods as the golden file says, byte for byte: figures, labels and
// timestamps (go test -run TestScrapeOutput -update ./agent/ writes it).
func TestScrapeOutput(t *testing.T) {
	pods, sum := oddPods()
	a := restingAgent(pods, sum)
	s, err := a.debugs.add("q1", v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger-abcde", Image: "busybox"}})
	if err != nil {
		t.Fatal(err)
	}
	s.id, s.started = "d1", scrapeAt.Add(-time.Second)
	if got := a.Pods(); len(got) != len(pods) {
		t.Fatalf("the agent shows %d pods, want %d", len(got), len(pods))
	}
	checkScrapeGolden(t, a, "scrape.golden")
}

// checkScrapeGolden compares the text of every scrape path of a (of
// /metrics, the agent's own families) with testdata/name, which
// -update-golden writes.
func checkScrapeGolden(t *testing.T, a *Agent, name string) {
	t.Helper()
	h := server.ReadOnly(a, server.NewMetrics(a), slog.New(slog.DiscardHandler))
	var b strings.Builder
	for _, path := range scrapePaths {
		text := scrape(t, h, path)
		if path == "/metrics" {
			text = agentFamilies(text)
		}
		fmt.Fprintf(&b, "==> GET %s\n%s", path, text)
	}
	golden := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("the scrape differs from %s:\n%s", golden, lineDiff(string(want), got))
	}
}

// lineDiff lists the lines of want missing from got (-) and of got not in
// want (+).
func lineDiff(want, got string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := count(want), count(got)
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if g[l] < w[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if w[l] < g[l] {
			out = append(out, "+ "+l)
		}
	}
	if len(out) == 0 {
		return "(the same lines, in another order)"
	}
	return strings.Join(out, "\n")
}
