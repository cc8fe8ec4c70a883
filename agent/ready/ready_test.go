package ready

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/prober"
)

func TestParseReadyWhen(t *testing.T) {
	for _, tc := range []struct {
		in    string
		cond  string
		names []string
		err   string
	}{
		{in: "", cond: Synced},
		{in: "synced", cond: Synced},
		{in: "pods-running", cond: PodsRunning},
		{in: "pods-ready", cond: PodsReady},
		{in: "pods-ready:etcd,kube-system/kube-apiserver", cond: PodsReady, names: []string{"etcd", "kube-system/kube-apiserver"}},
		{in: "pods-ready: etcd , web", cond: PodsReady, names: []string{"etcd", "web"}},
		{in: "synced:etcd", err: "takes no pod names"},
		{in: "pods-up", err: "want synced"},
		{in: "pods-ready:", err: `pod name ""`},
		{in: "pods-ready:a,,b", err: `pod name ""`},
		{in: "pods-ready:a/b/c", err: "not [namespace/]name"},
	} {
		w, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if w.cond != tc.cond || strings.Join(w.names, "|") != strings.Join(tc.names, "|") {
			t.Errorf("Parse(%q) = %+v, want %s %v", tc.in, w, tc.cond, tc.names)
		}
	}
}

func pod(ns, name string, phase v1.PodPhase, ready bool, cs ...v1.ContainerStatus) v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: v1.PodStatus{
			Phase:             phase,
			Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: st}},
			ContainerStatuses: cs,
		},
	}
}

func running(name string, ready bool) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, Ready: ready, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func waiting(name, reason string, restarts int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, RestartCount: restarts, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}
}

func TestReadyWhenCheck(t *testing.T) {
	const node = "n1"
	etcdUp := pod("kube-system", "etcd-n1", v1.PodRunning, true, running("etcd", true))
	webUnready := pod("default", "web-n1", v1.PodRunning, false, running("httpd", false))
	webCreating := pod("default", "web-n1", v1.PodPending, false, waiting("httpd", "ContainerCreating", 0))
	webCrashing := pod("default", "web-n1", v1.PodRunning, false, waiting("httpd", "CrashLoopBackOff", 3))
	webNoImage := pod("default", "web-n1", v1.PodPending, false, waiting("httpd", "ErrImageNeverPull", 0))
	for _, tc := range []struct {
		name        string
		when        string
		pods        []v1.Pod
		ok          bool
		waiting     string // contained in the STATUS= text
		progressing bool
	}{
		{"running: all running", "pods-running", []v1.Pod{etcdUp, webUnready}, true, "", false},
		{"ready: one unready", "pods-ready", []v1.Pod{etcdUp, webUnready}, false, "pod web-n1 (container httpd not ready)", true},
		{"ready: only the chosen one, by manifest name", "pods-ready:etcd", []v1.Pod{etcdUp, webUnready}, true, "", false},
		{"ready: chosen by full name and namespace", "pods-ready:kube-system/etcd-n1", []v1.Pod{etcdUp, webUnready}, true, "", false},
		{"ready: wrong namespace is missing, and that does not pass", "pods-ready:default/etcd", []v1.Pod{etcdUp}, false, "pod default/etcd (no such pod yet)", false},
		{"running: creating is progressing", "pods-running:web", []v1.Pod{webCreating}, false, "container httpd ContainerCreating", true},
		{"running: crash loop has failed", "pods-running:web", []v1.Pod{webCrashing}, false, "container httpd CrashLoopBackOff", false},
		{"running: missing image has failed", "pods-running", []v1.Pod{webNoImage}, false, "ErrImageNeverPull", false},
		{"ready: no pods at all", "pods-ready", nil, true, "", false},
	} {
		w, err := Parse(tc.when)
		if err != nil {
			t.Fatal(err)
		}
		ok, waitingText, progressing := w.check(tc.pods, nil, node)
		if ok != tc.ok || !strings.Contains(waitingText, tc.waiting) || progressing != tc.progressing {
			t.Errorf("%s: check = %v %q %v, want %v (containing %q) %v", tc.name, ok, waitingText, progressing, tc.ok, tc.waiting, tc.progressing)
		}
	}
}

// A readiness probe that fails is not progress: the start timeout applies.
func TestReadyWhenProbeFailing(t *testing.T) {
	w, _ := Parse("pods-ready:web")
	web := pod("default", "web-n1", v1.PodRunning, false, running("httpd", false))
	probes := []prober.Status{{Namespace: "default", Pod: "web-n1", Container: "httpd", Probe: prober.Liveness, Result: "success"}}
	if ok, _, progressing := w.check([]v1.Pod{web}, probes, "n1"); ok || !progressing {
		t.Errorf("no readiness result yet: ok=%v progressing=%v, want false true", ok, progressing)
	}
	probes = append(probes, prober.Status{Namespace: "default", Pod: "web-n1", Container: "httpd", Probe: prober.Readiness, Result: "failure"})
	ok, waiting, progressing := w.check([]v1.Pod{web}, probes, "n1")
	if ok || progressing || !strings.Contains(waiting, "container httpd readiness probe failure") {
		t.Errorf("readiness failing: %v %q %v, want false, the probe named, false", ok, waiting, progressing)
	}
}
