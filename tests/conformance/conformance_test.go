//go:build conformance

package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

// nodeName is both sides' node name, so that pod names match.
const nodeName = "conformance"

// settled says, for each manifest of testdata, when its pod has reached the
// state the first comparison is made in: what its containers themselves do
// (exit, run, fail a probe), never a time.
var settled = map[string]func(p *v1.Pod) error{
	"plain":               podReady,
	"crashloop":           restartedAtLeast(1),
	"completed":           phase(v1.PodSucceeded),
	"failed":              phase(v1.PodFailed),
	"init":                podReady,
	"init-failed":         phase(v1.PodFailed),
	"multi":               podReady,
	"qos-guaranteed":      podReady,
	"qos-burstable":       podReady,
	"probes":              containerReady("ready"),
	"missing-image":       waiting("main", "ErrImageNeverPull"),
	"hooks":               podReady,
	"sidecar":             podReady,
	"termination-message": phase(v1.PodFailed),
	"oom":                 phase(v1.PodFailed),
}

// TestStatusAgainstKubelet runs the manifests of testdata under staticpodd
// and under the real kubelet (standalone, on containerd, hostNetwork pods:
// the kubelet's side has no CNI) at the same instant, and compares both
// /pods field by field: once every pod has settled, and again once the
// crash-looping pod has been restarted twice on both sides. A difference
// not listed in intended.txt fails the test.
func TestStatusAgainstKubelet(t *testing.T) {
	intended, err := ParseIntended("intended.txt")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("../../docs/kubelet-differences.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckParagraphs(intended, string(docs)); err != nil {
		t.Fatal(err)
	}
	manifests, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifests in testdata: %v", err)
	}
	for _, m := range manifests {
		if settled[strings.TrimSuffix(filepath.Base(m), ".yaml")] == nil {
			t.Fatalf("%s: no settled state for it in this test", m)
		}
	}

	k := startKubelet(t, "") // stopped after staticpodd, whose cleanup is registered next
	d := testdaemon.New(t)
	d.Name = nodeName
	d.Start()
	writeAtOnce(t, manifests, k.manifests, d.Manifests)

	ours := func() []v1.Pod { return d.Pods() }
	theirs := func() []v1.Pod { return k.pods(t) }
	waitAll(t, "every pod settled on both sides", 3*time.Minute, ours, theirs, settled)
	compare(t, "settled", intended, theirs(), ours())

	twice := map[string]func(*v1.Pod) error{"crashloop": restartedAtLeast(2)}
	waitAll(t, "the crash-looping pod restarted twice on both sides", 3*time.Minute, ours, theirs, twice)
	compare(t, "crash loop restarted twice", intended, theirs(), ours())

	for _, in := range intended {
		if in.Used == 0 {
			t.Logf("intended.txt:%d (%s %s) explained no difference in this run", in.Line, in.Pod, in.Field)
		}
	}
}

// compare fails t on every difference between the kubelet's pods and ours
// that intended does not explain.
func compare(t *testing.T, when string, intended []*Intended, kubelet, ours []v1.Pod) {
	t.Helper()
	byName := func(pods []v1.Pod) map[string]v1.Pod {
		m := map[string]v1.Pod{}
		for _, p := range pods {
			m[strings.TrimSuffix(p.Name, "-"+nodeName)] = p
		}
		return m
	}
	k, o := byName(kubelet), byName(ours)
	var unexplained, explained []string
	fields := 0
	for name, kp := range k {
		op, ok := o[name]
		if !ok {
			unexplained = append(unexplained, name+": only the kubelet has it")
			continue
		}
		kf, of := fieldsOf(t, kp), fieldsOf(t, op)
		fields += len(kf)
		ds := Compare(name, kf, of)
		Explain(ds, intended)
		for _, d := range ds {
			if missedOOM(kp, op, d) {
				t.Logf("%s: %s, skipped: the kubelet's containerd missed the OOM kill of an exit code 137", when, d)
				continue
			}
			if d.Explained == nil {
				unexplained = append(unexplained, d.String())
			} else {
				explained = append(explained, fmt.Sprintf("%s (%s)", d, d.Explained.Para))
			}
		}
	}
	for name := range o {
		if _, ok := k[name]; !ok {
			unexplained = append(unexplained, name+": only staticpodd has it")
		}
	}
	t.Logf("%s: %d pods, %d fields of the kubelet's; %d intended differences:\n  %s", when, len(k), fields, len(explained), strings.Join(explained, "\n  "))
	if len(unexplained) > 0 {
		t.Errorf("%s: %d differences from the kubelet that intended.txt does not list:\n  %s", when, len(unexplained), strings.Join(unexplained, "\n  "))
	}
}

// missedOOM says whether d is the kubelet's side missing an OOM kill that
// ours shows: containerd on cgroup v1 learns of it from the memory
// cgroup's OOM event, which can come after the task's exit is handled, and
// then shows the container, SIGKILLed (137) by the kernel's OOM killer, as
// an "Error". Only that pair is let through: ours must say OOMKilled, and
// both must have exited 137.
func missedOOM(kubelet, ours v1.Pod, d Diff) bool {
	name, ok := strings.CutPrefix(d.Path, ".status.containerStatuses[")
	if !ok {
		return false
	}
	name, ok = strings.CutSuffix(name, "].state.terminated.reason")
	if !ok {
		return false
	}
	terminated := func(p v1.Pod) *v1.ContainerStateTerminated {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == name {
				return cs.State.Terminated
			}
		}
		return nil
	}
	k, o := terminated(kubelet), terminated(ours)
	return k != nil && o != nil && k.Reason == "Error" && o.Reason == "OOMKilled" && k.ExitCode == 137 && o.ExitCode == 137
}

func fieldsOf(t *testing.T, p v1.Pod) []Field {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return Normalise(Flatten("", v), string(p.UID))
}

// writeAtOnce puts each manifest into every directory, renaming the copies
// into place one right after the other.
func writeAtOnce(t *testing.T, manifests []string, dirs ...string) {
	t.Helper()
	type move struct{ from, to string }
	var moves []move
	for _, m := range manifests {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range dirs {
			tmp := filepath.Join(filepath.Dir(dir), "."+filepath.Base(m))
			if err := os.WriteFile(tmp, b, 0o644); err != nil {
				t.Fatal(err)
			}
			moves = append(moves, move{tmp, filepath.Join(dir, filepath.Base(m))})
		}
	}
	for _, mv := range moves {
		if err := os.Rename(mv.from, mv.to); err != nil {
			t.Fatal(err)
		}
	}
}

// waitAll waits until each pod that want names satisfies it on both sides.
func waitAll(t *testing.T, what string, timeout time.Duration, ours, theirs func() []v1.Pod, want map[string]func(*v1.Pod) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var errs []string
		for side, list := range map[string]func() []v1.Pod{"staticpodd": ours, "kubelet": theirs} {
			pods := map[string]*v1.Pod{}
			for _, p := range list() {
				pods[strings.TrimSuffix(p.Name, "-"+nodeName)] = &p
			}
			for name, f := range want {
				p := pods[name]
				if p == nil {
					errs = append(errs, fmt.Sprintf("%s: no pod %s", side, name))
				} else if err := f(p); err != nil {
					errs = append(errs, fmt.Sprintf("%s: %s: %v", side, name, err))
				}
			}
		}
		if len(errs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s:\n  %s", timeout, what, strings.Join(errs, "\n  "))
		}
		<-tick.C
	}
}

func podReady(p *v1.Pod) error {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("not Ready (phase %s)", p.Status.Phase)
}

func phase(want v1.PodPhase) func(*v1.Pod) error {
	return func(p *v1.Pod) error {
		if p.Status.Phase != want {
			return fmt.Errorf("phase %s, want %s", p.Status.Phase, want)
		}
		return nil
	}
}

func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func restartedAtLeast(n int32) func(*v1.Pod) error {
	return func(p *v1.Pod) error {
		cs := containerStatus(p, "main")
		if cs == nil || cs.RestartCount < n {
			return fmt.Errorf("main restarted fewer than %d times", n)
		}
		return nil
	}
}

func containerReady(name string) func(*v1.Pod) error {
	return func(p *v1.Pod) error {
		if cs := containerStatus(p, name); cs == nil || !cs.Ready {
			return fmt.Errorf("%s not ready", name)
		}
		return nil
	}
}

func waiting(name, reason string) func(*v1.Pod) error {
	return func(p *v1.Pod) error {
		if cs := containerStatus(p, name); cs == nil || cs.State.Waiting == nil || cs.State.Waiting.Reason != reason {
			return fmt.Errorf("%s not waiting %s", name, reason)
		}
		return nil
	}
}

// getPods reads a PodList from url.
func getPods(url string) ([]v1.Pod, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("decode %s: %w", url, err)
	}
	return list.Items, nil
}

// missedOOM lets through the kubelet's "Error" for an OOM kill ours shows,
// and nothing else.
func TestMissedOOM(t *testing.T) {
	pod := func(reason string, code int32) v1.Pod {
		return v1.Pod{Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "main",
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reason, ExitCode: code}}}}}}
	}
	const path = ".status.containerStatuses[main].state.terminated.reason"
	for _, tc := range []struct {
		kubelet, ours v1.Pod
		path          string
		want          bool
	}{
		{pod("Error", 137), pod("OOMKilled", 137), path, true},
		{pod("OOMKilled", 137), pod("Error", 137), path, false},
		{pod("Error", 1), pod("OOMKilled", 137), path, false},
		{pod("Error", 137), pod("Error", 137), path, false},
		{pod("Error", 137), pod("OOMKilled", 137), ".status.containerStatuses[main].state.terminated.exitCode", false},
		{pod("Error", 137), pod("OOMKilled", 137), ".status.containerStatuses[other].state.terminated.reason", false},
	} {
		d := Diff{Pod: "oom", Path: tc.path}
		if got := missedOOM(tc.kubelet, tc.ours, d); got != tc.want {
			t.Errorf("missedOOM(kubelet %+v, ours %+v, %s) = %v, want %v", tc.kubelet.Status.ContainerStatuses[0].State.Terminated,
				tc.ours.Status.ContainerStatuses[0].State.Terminated, tc.path, got, tc.want)
		}
	}
}
