package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

func TestPodStatusFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{NodeIP: netip.MustParseAddr("192.0.2.10")})
		host := testPod("host", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		host.Spec.HostNetwork = true
		private := testPod("private", "u2", v1.RestartPolicyAlways, ctr("a", "busybox"), ctr("b", "busybox"))
		h.send([]manifest.Pod{host, private})

		hs := h.pod("host").Status
		if hs.HostIP != "192.0.2.10" || hs.PodIP != "192.0.2.10" {
			t.Errorf("hostNetwork pod hostIP %q podIP %q, want the node IP for both", hs.HostIP, hs.PodIP)
		}
		ps := h.pod("private").Status
		if ps.HostIP != "192.0.2.10" || ps.PodIP != "" {
			t.Errorf("private pod hostIP %q podIP %q, want node IP and none", ps.HostIP, ps.PodIP)
		}
		if ps.StartTime == nil || !ps.StartTime.Time.Equal(time.Now()) {
			t.Errorf("startTime = %v, want now", ps.StartTime)
		}
		want := map[v1.PodConditionType]v1.ConditionStatus{
			v1.PodScheduled: v1.ConditionTrue, v1.PodInitialized: v1.ConditionTrue, v1.ContainersReady: v1.ConditionTrue,
			v1.PodReady: v1.ConditionTrue, v1.PodReadyToStartContainers: v1.ConditionTrue,
		}
		for _, c := range ps.Conditions {
			if want[c.Type] != c.Status {
				t.Errorf("condition %s = %s, want %s", c.Type, c.Status, want[c.Type])
			}
			delete(want, c.Type)
		}
		if len(want) != 0 {
			t.Errorf("missing conditions %v", want)
		}
		readySince := ps.Conditions[2].LastTransitionTime

		time.Sleep(time.Minute)
		// Container a of the private pod crashes, is restarted at once, crashes
		// again and is now in back-off.
		for range 2 {
			rt.Exit(strings.TrimPrefix(h.pod("private").Status.ContainerStatuses[0].ContainerID, containerIDPrefix), 3)
			synctest.Wait()
		}
		ps = h.pod("private").Status
		for _, c := range ps.Conditions {
			if c.Type == v1.PodReady && (c.Status != v1.ConditionFalse || c.Message != "containers with unready status: [a]" ||
				!c.LastTransitionTime.After(readySince.Time)) {
				t.Errorf("Ready after a crash = %+v, want False naming a, moved transition time", c)
			}
			if c.Type == v1.PodScheduled && !c.LastTransitionTime.Equal(&readySince) {
				t.Errorf("PodScheduled transition time moved without a transition")
			}
		}
		a := ps.ContainerStatuses[0]
		if a.Ready || *a.Started || a.RestartCount != 1 || a.LastTerminationState.Terminated == nil || a.LastTerminationState.Terminated.ExitCode != 3 ||
			a.LastTerminationState.Terminated.Reason != "Error" || a.ImageID != "sha256:busybox" {
			t.Errorf("crashed container status = %+v", a)
		}
	})
}

// Termination messages share 12 KiB per pod, cut evenly among its
// containers, current and last states alike (the kubelet's normalizeStatus).
func TestTerminationMessagesBoundedPerPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		var ctrs []v1.Container
		for _, n := range []string{"a", "b", "c", "d"} {
			rt.crash[n] = 1
			rt.messages[n] = strings.Repeat(n, podspec.MaxTerminationMessage)
			ctrs = append(ctrs, ctr(n, "busybox"))
		}
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctrs...)})
		time.Sleep(time.Second) // the first restart is immediate; the second exit waits in back-off
		synctest.Wait()
		for _, cs := range h.pod("web").Status.ContainerStatuses {
			last := cs.LastTerminationState.Terminated
			if last == nil || last.Message != strings.Repeat(cs.Name, 3072) {
				t.Errorf("container %s: last state %+v, want a message of 12 KiB / 4 containers", cs.Name, last)
			}
		}
	})
}

// During an edit the old generation is listed Terminating beside the new
// one, which waits, until the old one is gone.
func TestEditListsOldGenerationTerminating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		h.updates <- sourceUpdate(manifest.SourceFile, testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox", "sleep", "9")))
		synctest.Wait()

		pods := h.a.Pods()
		if len(pods) != 2 {
			t.Fatalf("%d pods during the edit, want the old and the new", len(pods))
		}
		old, cur := pods[0], pods[1]
		if old.UID != "u1" || old.DeletionTimestamp == nil || *old.DeletionGracePeriodSeconds != 5 ||
			old.Status.ContainerStatuses[0].State.Running == nil {
			t.Errorf("old generation = %s deletion %v, state %+v; want u1 terminating, still running", old.UID, old.DeletionTimestamp,
				old.Status.ContainerStatuses[0].State)
		}
		if cur.UID != "u2" || cur.DeletionTimestamp != nil || cur.Status.Phase != v1.PodPending {
			t.Errorf("new generation = %s %s, want u2 Pending", cur.UID, cur.Status.Phase)
		}

		time.Sleep(5 * time.Second)
		synctest.Wait()
		if pods := h.a.Pods(); len(pods) != 1 || pods[0].UID != "u2" || pods[0].Status.Phase != v1.PodRunning {
			t.Errorf("after the grace period: %d pods, want u2 Running alone", len(pods))
		}
	})
}

// status.startTime is when the agent first took the pod on, and stays so
// across a daemon restart, even when every container it started then has
// been replaced since.
func TestStartTimeSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["a"] = 1
		store := NewSeenStore(manifest.Paths{RootDir: t.TempDir()})
		t0 := time.Now()
		h := start(t, rt, Config{Seen: store})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		h.send([]manifest.Pod{pod})
		time.Sleep(time.Minute)
		synctest.Wait()
		h.stop()
		if got := rt.Calls("destroy c1"); len(got) != 1 {
			t.Fatalf("the first container is still there: %q", rt.Calls())
		}

		h2 := start(t, rt, Config{Seen: store})
		h2.send([]manifest.Pod{pod})
		if st := h2.pod("web").Status.StartTime; st == nil || !st.Time.Equal(t0) {
			t.Errorf("startTime after the restart = %v, want %v", st, t0)
		}
	})
}

// The STATUS line kept per worker says what a count of every pod says,
// through starts, crash loops, edits and removals.
func TestSummaryIncremental(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["bad"] = 1
		h := start(t, rt, Config{})
		full := func() string {
			pods := h.a.Pods()
			h.a.mu.Lock()
			defer h.a.mu.Unlock()
			// The line names waiting pods in order.
			slices.SortFunc(pods, func(a, b v1.Pod) int { return strings.Compare(a.Name, b.Name) })
			s := status.Summarize(pods, h.a.cfg.NodeName, len(h.a.problems))
			if c := h.a.Conditions(); len(c) > 0 {
				s += "; node has " + joinConditions(c)
			}
			return s
		}
		var pods []manifest.Pod
		for i := range 20 {
			c := ctr("a", "busybox")
			if i%5 == 0 {
				c = ctr("bad", "busybox")
			}
			pods = append(pods, testPod(fmt.Sprintf("p%02d", i), fmt.Sprintf("u%02d", i), v1.RestartPolicyAlways, c))
		}
		for step, set := range [][]manifest.Pod{pods, pods[5:], pods[:3], nil} {
			h.send(set)
			synctest.Wait()
			if got, want := h.a.Summary(), full(); got != want {
				t.Errorf("step %d: Summary() = %q, a full count says %q", step, got, want)
			}
		}
		if s := h.a.Summary(); s != "0 pods" {
			t.Errorf("Summary() = %q once every pod is gone", s)
		}
	})
}

// A pod's IPs are those its sandbox got, the first as podIP; a pod whose
// sandbox has no pod network says why in PodReadyToStartContainers.
func TestPodStatusPodIPs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.podIPs = map[string][]netip.Addr{"u1": {netip.MustParseAddr("10.86.0.5"), netip.MustParseAddr("fd00::5")}}
		rt.noNet = map[string]string{"u2": "no CNI plugin bridge"}
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{
			testPod("net", "u1", v1.RestartPolicyAlways, ctr("a", "busybox")),
			testPod("lo", "u2", v1.RestartPolicyAlways, ctr("a", "busybox")),
		})
		ns := h.pod("net").Status
		if ns.PodIP != "10.86.0.5" || len(ns.PodIPs) != 2 || ns.PodIPs[1].IP != "fd00::5" {
			t.Errorf("podIP %q podIPs %v, want 10.86.0.5 and fd00::5", ns.PodIP, ns.PodIPs)
		}
		ls := h.pod("lo").Status
		if ls.PodIP != "" || len(ls.PodIPs) != 0 {
			t.Errorf("pod without a network: podIP %q podIPs %v", ls.PodIP, ls.PodIPs)
		}
		for _, c := range ls.Conditions {
			if c.Type == v1.PodReadyToStartContainers && (c.Status != v1.ConditionTrue || c.Reason != status.NoPodNetwork || c.Message != "no CNI plugin bridge") {
				t.Errorf("PodReadyToStartContainers of a pod without a network: %+v", c)
			}
		}
	})
}

// A waiting container's message quotes the error that keeps it from
// running, which a registry, a plugin or a hook may have made as long as it
// liked: it is cut to podspec.MaxStatusMessage.
func TestWaitingMessageBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.startErr = errString("create container: " + strings.Repeat("x", 1<<20))
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		w := h.pod("web").Status.ContainerStatuses[0].State.Waiting
		if w == nil {
			t.Fatal("not waiting")
		}
		if !strings.HasPrefix(w.Message, "create container: xxx") || len(w.Message) > podspec.MaxStatusMessage {
			t.Fatalf("waiting state with a message of %d bytes, want the start of the error, at most %d", len(w.Message), podspec.MaxStatusMessage)
		}
	})
}

// The published pod leaves out the agent's own annotations, and takes them
// from neither the pod it was made of nor the next status: the pod handed
// to the worker is shared with the published one, never changed by it.
func TestPublishedPodSharesNothingItChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		p := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		p.Annotations = map[string]string{
			manifest.AnnotationContainerHashes: "a=1", manifest.AnnotationManifestUID: "m1", "team": "web",
		}
		h.send([]manifest.Pod{p})

		pub := h.pod("web")
		if _, ok := pub.Annotations[manifest.AnnotationContainerHashes]; ok {
			t.Errorf("published annotations %v hold the containers' hashes", pub.Annotations)
		}
		if _, ok := pub.Annotations[manifest.AnnotationManifestUID]; ok {
			t.Errorf("published annotations %v hold the manifest's UID", pub.Annotations)
		}
		if pub.Annotations["team"] != "web" || pub.Spec.Containers[0].Image != "busybox" {
			t.Errorf("published pod = %+v, want the manifest's annotation and spec", pub.ObjectMeta)
		}
		want := map[string]string{manifest.AnnotationContainerHashes: "a=1", manifest.AnnotationManifestUID: "m1", "team": "web"}
		if len(p.Annotations) != len(want) || p.Annotations[manifest.AnnotationContainerHashes] != "a=1" ||
			p.Annotations[manifest.AnnotationManifestUID] != "m1" || p.Annotations["team"] != "web" {
			t.Errorf("the desired pod's annotations became %v, want %v", p.Annotations, want)
		}
		if p.Status.Phase != "" || len(p.Status.Conditions) != 0 {
			t.Errorf("the desired pod's status became %+v, want none", p.Status)
		}
	})
}
