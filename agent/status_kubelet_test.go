package agent

import (
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// Each test here pins one field of the status the way the kubelet v1.37
// writes it, on the worker's own output, and names the kubelet function it
// follows; tests/conformance compares the whole status with the real kubelet.

func statusCondition(t *testing.T, s v1.PodStatus, typ v1.PodConditionType) v1.PodCondition {
	t.Helper()
	for _, c := range s.Conditions {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("no %s condition in %+v", typ, s.Conditions)
	return v1.PodCondition{}
}

func wantCondition(t *testing.T, s v1.PodStatus, typ v1.PodConditionType, status v1.ConditionStatus, reason, message string) {
	t.Helper()
	c := statusCondition(t, s, typ)
	if c.Status != status || c.Reason != reason || c.Message != message {
		t.Errorf("%s = %s reason %q message %q, want %s reason %q message %q", typ, c.Status, c.Reason, c.Message, status, reason, message)
	}
}

// convertStatusToAPIStatus: qosClass is v1qos.GetPodQOS of the pod.
func TestStatusQOSClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newFakeRuntime(), Config{})
		best := testPod("best", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		g := ctr("a", "busybox")
		g.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}
		g.Resources.Requests = g.Resources.Limits.DeepCopy()
		guaranteed := testPod("guaranteed", "u2", v1.RestartPolicyAlways, g)
		b := ctr("a", "busybox")
		b.Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}
		burstable := testPod("burstable", "u3", v1.RestartPolicyAlways, b)
		h.send([]manifest.Pod{best, guaranteed, burstable})
		for name, want := range map[string]v1.PodQOSClass{"best": v1.PodQOSBestEffort, "guaranteed": v1.PodQOSGuaranteed, "burstable": v1.PodQOSBurstable} {
			if got := h.pod(name).Status.QOSClass; got != want {
				t.Errorf("%s: qosClass %q, want %q", name, got, want)
			}
		}
	})
}

// convertStatusToAPIStatus (InPlacePodLevelResourcesVerticalScaling, on by
// default): status.resources is getEffectiveAllocatedResources, the pod's
// requests and limits summed the resourcehelper way, allocatedResources its
// requests; convertToAPIContainerStatuses (InPlacePodVerticalScaling): a
// container the runtime knows reports its resources and its requests as
// allocated, a container never made reports neither.
func TestStatusResources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["absent"] = true
		h := start(t, rt, Config{})
		a := ctr("a", "busybox")
		a.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")}
		a.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
		b := ctr("b", "busybox")
		b.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m")}
		c := ctr("c", "absent")
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, a, b, c)})

		s := h.pod("web").Status
		wantReq := v1.ResourceList{v1.ResourceCPU: resource.MustParse("150m"), v1.ResourceMemory: resource.MustParse("32Mi")}
		if s.Resources == nil || !equalList(s.Resources.Requests, wantReq) || !equalList(s.Resources.Limits, a.Resources.Limits) {
			t.Errorf("status.resources = %+v, want requests %v and a's limits", s.Resources, wantReq)
		}
		if !equalList(s.AllocatedResources, wantReq) {
			t.Errorf("status.allocatedResources = %v, want %v", s.AllocatedResources, wantReq)
		}
		byName := map[string]v1.ContainerStatus{}
		for _, cs := range s.ContainerStatuses {
			byName[cs.Name] = cs
		}
		if r := byName["a"].Resources; r == nil || !equalList(r.Requests, a.Resources.Requests) || !equalList(r.Limits, a.Resources.Limits) ||
			!equalList(byName["a"].AllocatedResources, a.Resources.Requests) {
			t.Errorf("container a: resources %+v allocated %v, want its spec's", r, byName["a"].AllocatedResources)
		}
		if byName["c"].Resources != nil || byName["c"].AllocatedResources != nil {
			t.Errorf("container c (never made): resources %+v allocated %v, want none", byName["c"].Resources, byName["c"].AllocatedResources)
		}
	})
}

func equalList(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if r, ok := b[k]; !ok || q.Cmp(r) != 0 {
			return false
		}
	}
	return true
}

// GenerateContainersReadyCondition, GeneratePodReadyCondition
// (generateContainersReadyConditionForTerminalPhase): a Failed pod is not
// ready for reason PodFailed and says nothing more; a Succeeded one for
// PodCompleted.
func TestStatusTerminalPodReadyConditions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["bad"], rt.crash["ok"] = 3, 0
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{
			testPod("failed", "u1", v1.RestartPolicyNever, ctr("bad", "busybox"), ctr("ok", "busybox")),
			testPod("done", "u2", v1.RestartPolicyNever, ctr("ok", "busybox")),
		})
		f := h.pod("failed").Status
		if f.Phase != v1.PodFailed {
			t.Fatalf("phase %s, want Failed", f.Phase)
		}
		wantCondition(t, f, v1.PodReady, v1.ConditionFalse, "PodFailed", "")
		wantCondition(t, f, v1.ContainersReady, v1.ConditionFalse, "PodFailed", "")
		d := h.pod("done").Status
		if d.Phase != v1.PodSucceeded {
			t.Fatalf("phase %s, want Succeeded", d.Phase)
		}
		wantCondition(t, d, v1.PodReady, v1.ConditionFalse, "PodCompleted", "")
		wantCondition(t, d, v1.ContainersReady, v1.ConditionFalse, "PodCompleted", "")
	})
}

// GeneratePodInitializedCondition: a Succeeded pod is initialized for reason
// PodCompleted, with or without init containers.
func TestStatusSucceededPodInitialized(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["init"], rt.crash["ok"] = 0, 0
		h := start(t, rt, Config{})
		withInit := testPod("init", "u1", v1.RestartPolicyNever, ctr("ok", "busybox"))
		withInit.Spec.InitContainers = []v1.Container{ctr("init", "busybox")}
		h.send([]manifest.Pod{withInit, testPod("plain", "u2", v1.RestartPolicyOnFailure, ctr("ok", "busybox"))})
		for _, name := range []string{"init", "plain"} {
			s := h.pod(name).Status
			if s.Phase != v1.PodSucceeded {
				t.Fatalf("%s: phase %s, want Succeeded", name, s.Phase)
			}
			wantCondition(t, s, v1.PodInitialized, v1.ConditionTrue, "PodCompleted", "")
		}
	})
}

// The prober manager's UpdatePodStatus: an init container that exited 0 is
// ready; one that failed is not, and the pod is not initialized
// (GeneratePodInitializedCondition's isInitContainerInitialized).
func TestStatusInitContainerReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["first"], rt.crash["second"] = 0, 1
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyNever, ctr("a", "busybox"))
		pod.Spec.InitContainers = []v1.Container{ctr("first", "busybox"), ctr("second", "busybox")}
		h.send([]manifest.Pod{pod})
		s := h.pod("web").Status
		if first := s.InitContainerStatuses[0]; first.State.Terminated == nil || !first.Ready {
			t.Errorf("init container that exited 0: state %+v ready %v, want terminated and ready", first.State, first.Ready)
		}
		if second := s.InitContainerStatuses[1]; second.State.Terminated == nil || second.Ready {
			t.Errorf("init container that failed: state %+v ready %v, want terminated, not ready", second.State, second.Ready)
		}
		if s.Phase != v1.PodFailed {
			t.Errorf("phase %s, want Failed", s.Phase)
		}
		wantCondition(t, s, v1.PodInitialized, v1.ConditionFalse, "ContainersNotInitialized", "containers with incomplete status: [second]")
	})
}

// convertToAPIContainerStatuses sorts regular containers' statuses by name
// (SortedContainerStatuses) and keeps init containers' in the spec's order
// (SortStatusesOfInitContainers); the unready list of the Ready condition
// follows the spec (GenerateContainersReadyCondition).
func TestStatusContainerOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["absent"] = true
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("zeta", "absent"), ctr("alpha", "busybox"), ctr("mid", "absent"))
		pod.Spec.InitContainers = []v1.Container{ctr("z-init", "busybox", "true"), ctr("a-init", "busybox", "true")}
		rt.crash["z-init"], rt.crash["a-init"] = 0, 0
		h.send([]manifest.Pod{pod})
		s := h.pod("web").Status
		var names, inits []string
		for _, cs := range s.ContainerStatuses {
			names = append(names, cs.Name)
		}
		for _, cs := range s.InitContainerStatuses {
			inits = append(inits, cs.Name)
		}
		if want := []string{"alpha", "mid", "zeta"}; !equalStrings(names, want) {
			t.Errorf("containerStatuses %v, want %v", names, want)
		}
		if want := []string{"z-init", "a-init"}; !equalStrings(inits, want) {
			t.Errorf("initContainerStatuses %v, want the spec's order %v", inits, want)
		}
		wantCondition(t, s, v1.ContainersReady, v1.ConditionFalse, "ContainersNotReady", "containers with unready status: [zeta mid]")
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// convertToAPIContainerStatuses' defaultWaitingState: in a pod with init
// containers every container not made yet, init or regular, waits
// PodInitializing; in a pod without, ContainerCreating.
func TestStatusWaitingReasons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		pod.Spec.InitContainers = []v1.Container{ctr("first", "busybox"), ctr("second", "busybox")}
		h.send([]manifest.Pod{pod}) // first runs and does not exit
		s := h.pod("web").Status
		if w := s.InitContainerStatuses[1].State.Waiting; w == nil || w.Reason != "PodInitializing" {
			t.Errorf("second init container: %+v, want waiting PodInitializing", s.InitContainerStatuses[1].State)
		}
		if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" {
			t.Errorf("regular container: %+v, want waiting PodInitializing", s.ContainerStatuses[0].State)
		}
		wantCondition(t, s, v1.PodInitialized, v1.ConditionFalse, "ContainersNotInitialized", "containers with incomplete status: [first second]")

		c := statusCondition(t, s, v1.PodReadyToStartContainers)
		if c.Status != v1.ConditionTrue {
			t.Errorf("PodReadyToStartContainers with a sandbox = %+v, want True", c)
		}
	})
}

// GeneratePodReadyToStartContainersCondition: without a sandbox the pod is
// not ready to start containers, for the reason and with the message of
// PodSandboxChanged when none exists.
func TestStatusNoSandbox(t *testing.T) {
	w := &worker{a: &Agent{}}
	pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox")).Pod
	s := w.podStatus(pod, w.podState(pod), w.gen.status())
	wantCondition(t, s, v1.PodReadyToStartContainers, v1.ConditionFalse, "PodSandboxNotReady", "no pod sandbox exists")
	if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" {
		t.Errorf("container of a pod without init containers: %+v, want waiting ContainerCreating", s.ContainerStatuses[0].State)
	}
}

// GeneratePodReadyCondition: a readiness gate whose condition nothing sets
// keeps a pod whose containers are all ready from being Ready.
func TestStatusReadinessGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newFakeRuntime(), Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
		h.send([]manifest.Pod{pod})
		time.Sleep(time.Second)
		synctest.Wait()
		s := h.pod("web").Status
		wantCondition(t, s, v1.ContainersReady, v1.ConditionTrue, "", "")
		wantCondition(t, s, v1.PodReady, v1.ConditionFalse, "ReadinessGatesNotReady",
			`corresponding condition of pod readiness gate "example.com/lb" does not exist.`)
	})
}
